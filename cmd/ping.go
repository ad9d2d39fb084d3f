package cmd

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The pings are sent by a program of their own, leaderrun-ping
// (cmd/leaderrun-ping), started only for a run with --ping: leaderrun
// itself links no network code (a run without --ping pays nothing for
// it). It is started as the child starts and reads, on its standard input,
// the URL, the bound, then one line per ping ("start", "ok", an exit code
// or "log", a tab, the body); it sends them in order, each retried with
// backoff, and once its input ends it gives up after the bound and writes
// one line per ping on its standard output ("KIND ok", "KIND dropped", or
// "KIND failed: REASON", never the URL). The URL goes through the pipe,
// not the command line, which every user of the host can read.

// pingProgram is the program that sends the pings.
const pingProgram = "leaderrun-ping"

// pingExitBound is the most a run's end waits for its pings: the end ping
// (and a start ping still retrying) is delivered within it or given up.
const pingExitBound = 2 * time.Second

// pingKillMargin is how much longer than pingExitBound leaderrun waits for
// leaderrun-ping to report before it kills it.
const pingKillMargin = 250 * time.Millisecond

// findPingProgram looks for leaderrun-ping next to the running program
// (or the leaderrun that dispatched to this store program), then on PATH.
func findPingProgram() (string, error) {
	self, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(self), pingProgram)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(pingProgram); err == nil {
		return p, nil
	}
	return "", usagef("--ping needs the program %s, which is neither next to %s nor on PATH; install it with: go install github.com/leaderrun/leaderrun/cmd/...@latest", pingProgram, self)
}

// pinger is one run's leaderrun-ping: started in the background, so that
// the child's start never waits for it. Its methods are called from one
// goroutine; wait must be called once the last send is, and is safe on a
// nil pinger.
type pinger struct {
	origin  string
	log     *slog.Logger
	spawned chan struct{} // closed once cmd is started (or failed to)
	mu      sync.Mutex    // guards the writes, started or not
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     io.ReadCloser
	err     error
	pending []string // lines written before the process was up
	kinds   []string // the pings sent, in order
	closed  bool
}

// startPinger starts leaderrun-ping in the background.
func startPinger(prog string, u *url.URL, log *slog.Logger) *pinger {
	p := &pinger{origin: pingOrigin(u), log: log, spawned: make(chan struct{})}
	go p.spawn(prog, u.String())
	return p
}

func (p *pinger) spawn(prog, rawURL string) {
	defer close(p.spawned)
	cmd := exec.Command(prog)
	// A group of its own: Ctrl-C at a terminal must not kill the end ping.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err == nil {
		p.out, err = cmd.StdoutPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.err = err
		return
	}
	p.cmd, p.in = cmd, in
	_, p.err = fmt.Fprintf(in, "%s\n%d\n%s", rawURL, pingExitBound.Milliseconds(), strings.Join(p.pending, ""))
	if p.closed {
		in.Close()
	}
}

// send queues the ping kind ("start", "" for success, an exit code, "log")
// with body.
func (p *pinger) send(kind, body string) {
	if kind == "" {
		kind = "ok"
	}
	line := kind + "\t" + body + "\n"
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kinds = append(p.kinds, kind)
	switch {
	case p.in == nil:
		p.pending = append(p.pending, line)
	case p.err == nil:
		_, p.err = io.WriteString(p.in, line)
	}
}

// close ends the pings: leaderrun-ping's bound starts.
func (p *pinger) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.in != nil {
		p.in.Close()
	}
}

// wait waits at most pingExitBound (and a margin) for leaderrun-ping's
// report, kills it if it is late, and warns once of what was not
// delivered.
func (p *pinger) wait() {
	if p == nil {
		return
	}
	deadline := time.NewTimer(pingExitBound + pingKillMargin)
	defer deadline.Stop()
	<-p.spawned // a fork and exec: it does not hang
	if p.cmd == nil {
		p.log.Warn(fmt.Sprintf("ping to %s not sent: %s could not be started: %v", p.origin, pingProgram, p.err), "event", "ping_not_delivered")
		return
	}
	report := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(p.out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		report <- lines
	}()
	var lines []string
	select {
	case lines = <-report:
	case <-deadline.C:
		_ = p.cmd.Process.Kill()
		<-report
		lines = []string{"all failed: " + pingProgram + " did not finish within " + pingExitBound.String()}
	}
	_ = p.cmd.Wait()
	var failed []string
	reported := map[string]bool{}
	for _, l := range lines {
		kind, res, _ := strings.Cut(l, " ")
		reported[kind] = true
		if strings.HasPrefix(res, "failed") {
			failed = append(failed, pingName(kind)+" "+res)
		}
	}
	if !reported["all"] {
		var lost []string
		for _, k := range p.kinds {
			if !reported[k] { // it ended without a word: it crashed, or was killed
				lost = append(lost, pingName(k))
			}
		}
		if len(lost) > 0 {
			failed = append(failed, pingProgram+" ended without sending "+strings.Join(lost, ", "))
		}
	}
	if len(failed) > 0 {
		p.log.Warn(fmt.Sprintf("ping to %s not delivered: %s", p.origin, strings.Join(failed, "; ")), "event", "ping_not_delivered")
	} else {
		p.log.Debug("pings delivered to "+p.origin, "event", "pinged")
	}
}

// pingName names a ping kind in a message.
func pingName(kind string) string {
	switch kind {
	case "all":
		return "every ping"
	case "start", "log":
		return kind
	case "ok":
		return "success"
	}
	return "exit " + kind
}
