package run

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

// The pings are sent by a program of their own, leaderrun-ping
// (cmd/leaderrun-ping), started only for a run with --ping: leaderrun
// itself links no network code (a run without --ping pays nothing for
// it). It is started as the child starts (with --ping-output-tail just
// before, as the child's output goes through it: outputtail.go) and reads,
// on its standard input, the URL, the bound, the format, the tail
// (pingwire.Tail), then one line per ping (pingwire.Ping:
// "start", "ok", an exit code or "log", the duration, the body); it sends
// them in order, shaped as the format says, each retried with
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

// FindPingProgram looks for leaderrun-ping next to the running program
// (or the leaderrun that dispatched to this store program), then on PATH.
func FindPingProgram() (string, error) { return findHelper(pingProgram, "--ping") }

// pinger is one run's leaderrun-ping: started in the background, so that
// the child's start never waits for it. Its methods are called from one
// goroutine; wait must be called once the last send is, and is safe on a
// nil pinger.
type pinger struct {
	origin  string
	format  pingwire.Format
	tail    pingwire.Tail // --ping-output-tail; the zero value: none
	extra   []*os.File    // the tail's descriptors (pingwire.Tail), from 3 on
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
func startPinger(prog string, u *url.URL, format pingwire.Format, log *slog.Logger) *pinger {
	p := &pinger{origin: pingOrigin(u), format: format, log: log, spawned: make(chan struct{})}
	go p.spawn(prog, u.String())
	return p
}

// startTailPinger starts leaderrun-ping with the tail's descriptors
// (pingwire.Tail) before it returns: the child's output goes through it,
// so it must be up before the child starts. False when it could not be
// started (the pinger then reports that at wait).
func startTailPinger(prog string, u *url.URL, format pingwire.Format, tail pingwire.Tail, extra []*os.File, log *slog.Logger) (*pinger, bool) {
	p := &pinger{origin: pingOrigin(u), format: format, tail: tail, extra: extra, log: log, spawned: make(chan struct{})}
	p.spawn(prog, u.String())
	return p, p.cmd != nil
}

func (p *pinger) spawn(prog, rawURL string) {
	defer close(p.spawned)
	cmd := exec.Command(prog)
	// A group of its own: Ctrl-C at a terminal must not kill the end ping.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.ExtraFiles = p.extra
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
	_, p.err = fmt.Fprintf(in, "%s\n%d\n%s\n%s%s", rawURL, pingExitBound.Milliseconds(), p.format, p.tail.Line(), strings.Join(p.pending, ""))
	if p.closed {
		in.Close()
	}
}

// send queues the ping pg (Kind "start", "ok", an exit code or "log").
func (p *pinger) send(pg pingwire.Ping) {
	line := pg.Line()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kinds = append(p.kinds, pg.Kind)
	switch {
	case p.in == nil:
		p.pending = append(p.pending, line)
	case p.err == nil:
		_, p.err = io.WriteString(p.in, line)
	}
}

// close ends the pings: leaderrun-ping's bound starts. It is safe on a nil
// pinger.
func (p *pinger) close() {
	if p == nil {
		return
	}
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
	end := time.Now().Add(pingExitBound + pingKillMargin)
	deadline := time.NewTimer(time.Until(end))
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
		p.reap(time.Until(end))
	case <-deadline.C:
		_ = p.cmd.Process.Kill()
		<-report
		lines = []string{"all failed: " + pingProgram + " did not finish within " + pingExitBound.String()}
		_ = p.cmd.Wait()
	}
	var failed []string
	reported := map[string]bool{}
	for _, l := range lines {
		kind, res, _ := strings.Cut(l, " ")
		reported[kind] = true
		if reason, ok := strings.CutPrefix(res, "failed: "); ok {
			failed = append(failed, pingName(kind)+": "+reason)
		} else if res == "dropped" {
			failed = append(failed, pingName(kind)+": dropped, the end's ping was due")
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

// reap waits for leaderrun-ping's exit once it has reported, until the
// time left runs out. With a tail it exits only once the child's output is
// closed: a process that left the child's group may hold it open, and its
// output must go on reaching its place, so leaderrun-ping is then left to
// copy it (and to init to reap) rather than killed.
func (p *pinger) reap(left time.Duration) {
	if len(p.tail.Streams) == 0 || exitsWithin(p.cmd.Process.Pid, left) {
		_ = p.cmd.Wait()
		return
	}
	p.log.Debug(pingProgram+" goes on copying the output of processes that left the command's group", "event", "ping_copy_goes_on")
	p.out.Close()
	_ = p.cmd.Process.Release()
}

// exitsWithin reports whether the child process pid has exited, or does
// within d: one wait on a pidfd, false where pidfd_open is missing (Linux
// before 5.3).
func exitsWithin(pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	end := time.Now().Add(d)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(max(time.Until(end), 0).Milliseconds()))
		if !errors.Is(err, unix.EINTR) {
			return n > 0
		}
	}
}

// pingName names a ping kind in a message.
func pingName(kind string) string {
	switch kind {
	case "all":
		return "every ping"
	case "start", "log":
		return "the " + kind + " ping"
	case "ok":
		return "the success ping"
	}
	return "the exit " + kind + " ping"
}
