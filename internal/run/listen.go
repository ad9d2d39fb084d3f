package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/internal/boottime"
	"github.com/leaderrun/leaderrun/internal/listenwire"
	"github.com/leaderrun/leaderrun/lease"
)

// --listen is served by a program of its own, leaderrun-listen
// (cmd/leaderrun-listen), started only for a run with --listen, as the
// pings are: leaderrun itself links no network code, and a run without
// the flag pays nothing for it. It is started first, before the store is
// opened, and the run goes on only once it has bound the address (one
// that is in use ends the run with ExitUsage, nothing taken or started).
// The run then writes it its state on a pipe at each change
// (internal/listenwire), from a goroutine of its own: neither a renewal
// nor a deadline ever waits for it. One step waits, boundedly: before the
// child is stopped under a held lease (lost, stepped down, the guard
// gone), the run tells it "stopping" and waits for its acknowledgement,
// at most listenAckBound and never past the lease's stop point, so that
// /leader answers 503 before the child gets its signal. The stop point
// wins: the keeper's kill timer and the guard act on their own, and
// leaderrun-listen, told the stop point with each renewal, answers 503
// from listenwire.Lead before it by its own clock, even if leaderrun is
// frozen. Its input's end (leaderrun exited or died) ends it.

// listenProgram is the program that serves --listen.
const listenProgram = "leaderrun-listen"

// listenAckBound is the most the child's stop waits for leaderrun-listen
// to acknowledge "stopping".
const listenAckBound = 100 * time.Millisecond

// listenBindBound is the most the run's start waits for leaderrun-listen
// to say it has bound the address (a fork, an exec and a bind).
const listenBindBound = 5 * time.Second

// listenExitBound is how long the run's end waits for leaderrun-listen to
// exit once its input ended, before it kills it.
const listenExitBound = time.Second

// FindListenProgram looks for leaderrun-listen as FindPingProgram looks
// for leaderrun-ping.
func FindListenProgram() (string, error) { return findHelper(listenProgram, "--listen") }

// listener is a run's leaderrun-listen. Its methods are safe on a nil
// listener (no --listen) and from any goroutine.
type listener struct {
	log      *slog.Logger
	ackBound time.Duration // how long stopping waits: listenAckBound (tests change it)
	cmd      *exec.Cmd
	in       io.WriteCloser
	bound    chan string // the first line of its output
	acks     chan uint64 // each acknowledged Seq, latest kept
	dirty    chan struct{}
	quit     chan struct{}
	wg       sync.WaitGroup // the writer and the reader

	mu      sync.Mutex
	st      listenwire.State
	acked   uint64
	ackedAt int64 // leaderrun-listen's boot clock reading when it applied acked
}

// spawnListener starts leaderrun-listen and hands it hello; awaitBound
// then says whether it bound the address.
func spawnListener(prog string, hello listenwire.Hello, log *slog.Logger) (*listener, error) {
	l := &listener{log: log, ackBound: listenAckBound, bound: make(chan string, 1), acks: make(chan uint64, 1), dirty: make(chan struct{}, 1), quit: make(chan struct{})}
	l.st.Role = listenwire.RoleWaiting
	cmd := exec.Command(prog)
	// A group of its own: Ctrl-C at a terminal must not take the endpoint
	// away while the run stops its child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("--listen: %s could not be started: %w", listenProgram, err)
	}
	l.cmd, l.in = cmd, in
	b, _ := json.Marshal(hello)
	_, _ = in.Write(append(b, '\n')) // a failure shows as no "bound" line
	l.wg.Add(2)
	go l.read(out)
	go l.write()
	return l, nil
}

// read reads leaderrun-listen's output until it ends.
func (l *listener) read(out io.Reader) {
	defer l.wg.Done()
	defer close(l.bound) // no line: it died
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		return
	}
	first := sc.Text()
	l.bound <- first
	if !strings.HasPrefix(first, "bound ") {
		return // it could not bind, and ends: awaitBound says why
	}
	for sc.Scan() {
		var seq uint64
		var at int64
		if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &seq, &at); err != nil {
			continue
		}
		l.mu.Lock()
		if seq > l.acked {
			l.acked, l.ackedAt = seq, at
		}
		l.mu.Unlock()
		select { // the latest is kept: stopping re-reads l.acked
		case l.acks <- seq:
		default:
		}
	}
	select {
	case <-l.quit: // the run's end closed its input
	default:
		// Its endpoint is gone (a load balancer sees this instance as no
		// leader); the run goes on, as with a ping that fails.
		l.log.Warn(listenProgram+" ended before the run did: --listen no longer answers", "event", "listen_ended")
	}
}

// write writes the state each time it changed, until quit; then the last
// state, and closes the input.
func (l *listener) write() {
	defer l.wg.Done()
	defer l.in.Close()
	for {
		select {
		case <-l.dirty:
		case <-l.quit:
			_ = l.writeState()
			return
		}
		if l.writeState() != nil {
			return // it is gone: the run goes on without it
		}
	}
}

func (l *listener) writeState() error {
	l.mu.Lock()
	b, _ := json.Marshal(l.st)
	l.mu.Unlock()
	_, err := l.in.Write(append(b, '\n'))
	return err
}

// awaitBound waits for leaderrun-listen to bind the address; an address it
// could not bind is a usage error (ExitUsage), said in one line, naming
// the flag with spell.
func (l *listener) awaitBound(addr string, spell lease.FlagSpeller) (string, error) {
	t := time.NewTimer(listenBindBound)
	defer t.Stop()
	select {
	case line, ok := <-l.bound:
		if a, found := strings.CutPrefix(line, "bound "); found {
			return a, nil
		}
		why, found := strings.CutPrefix(line, "error ")
		if !ok || !found {
			why = listenProgram + " ended without binding it"
		}
		return "", usagef("%s: %s", spell("listen", addr), why)
	case <-t.C:
		return "", usagef("%s: %s did not bind it within %v", spell("listen", addr), listenProgram, listenBindBound)
	}
}

// update changes the state with fn and has it written; it returns the
// state's Seq. It never blocks on leaderrun-listen.
func (l *listener) update(fn func(*listenwire.State)) uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	fn(&l.st)
	l.st.Seq++
	seq := l.st.Seq
	l.mu.Unlock()
	select {
	case l.dirty <- struct{}{}:
	default: // a write is pending: it will carry this state
	}
	return seq
}

// stopping tells leaderrun-listen the child is about to be stopped and
// waits for its acknowledgement, at most listenAckBound and never past
// the boot clock reading stopAt (0: no stop point).
func (l *listener) stopping(stopAt time.Duration) {
	if l == nil {
		return
	}
	var ran bool
	seq := l.update(func(s *listenwire.State) { s.Role, ran = listenwire.RoleStopping, s.Started })
	if !ran {
		return // /leader never answered 200 for this lease
	}
	wait := l.ackBound
	if stopAt != 0 {
		wait = min(wait, stopAt-boottime.Boot{}.Now())
	}
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		l.mu.Lock()
		done, at := l.acked >= seq, l.ackedAt
		l.mu.Unlock()
		if done {
			l.log.Debug("/leader answers 503: the child is stopped next", "event", "listen_stopping", "listen_boot_ns", at)
			return
		}
		select {
		case <-l.acks:
		case <-t.C:
			l.log.Debug(fmt.Sprintf("%s did not acknowledge the stop within %v; stopping the child anyway", listenProgram, wait), "event", "listen_late")
			return
		}
	}
}

// gate returns a context that ends, with parent's cause, once parent has
// and leaderrun-listen has acknowledged "stopping" (or stopping's bound
// passed): the runner stops the child when it ends. stopAt gives the
// lease's stop point (0: none). The returned func ends the gate's
// goroutine and waits for it.
func (l *listener) gate(parent context.Context, stopAt func() time.Duration) (context.Context, func()) {
	if l == nil {
		return parent, func() {}
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-parent.Done():
			l.stopping(stopAt())
			cancel(context.Cause(parent))
		case <-quit:
		}
	}()
	return ctx, func() {
		close(quit)
		<-done
		cancel(context.Canceled)
	}
}

// close ends leaderrun-listen: its input's last state, then its end, and
// waits for it to exit (killing it after listenExitBound).
func (l *listener) close() {
	if l == nil {
		return
	}
	close(l.quit)
	exited := make(chan struct{})
	go func() { // ends once the process has: killed below if it must
		defer close(exited)
		_ = l.cmd.Wait()
	}()
	t := time.NewTimer(listenExitBound)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = l.cmd.Process.Kill()
		<-exited
	}
	l.wg.Wait()
}

// findHelper looks for prog next to the running program (or the leaderrun
// that dispatched to this store program), then on PATH; flag is the flag
// that needs it.
func findHelper(prog, flag string) (string, error) {
	self, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(self), prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(prog); err == nil {
		return p, nil
	}
	return "", usagef("%s needs the program %s, which is neither next to %s nor on PATH; keep every leaderrun* program of a release in one directory, or build them all from a clone with: go build -o DIR/ . ./cmd/...", flag, prog, self)
}

// holderOf is h as /status shows it.
func holderOf(h lease.Holder) *listenwire.Holder {
	return &listenwire.Holder{Label: h.Label, Token: h.Token, Since: h.Since, Slot: h.Slot}
}

// The run's hooks: each changes the state leaderrun-listen answers from.

// waitEvent follows lease.Acquire's waiting: a standby while another
// holds the lease, waiting while the store does not answer.
func (l *listener) waitEvent(ev lease.WaitEvent) {
	switch ev.Kind {
	case lease.WaitStarted, lease.WaitHolderChanged:
		l.update(func(s *listenwire.State) {
			s.Role, s.Holder = listenwire.RoleStandby, holderOf(ev.By)
			if ev.Kind == lease.WaitHolderChanged {
				s.Transitions++
			}
		})
	case lease.WaitStoreUnavailable:
		l.update(func(s *listenwire.State) { s.Role, s.Holder = listenwire.RoleWaiting, nil })
	}
}

// holding: the lease is ours and kept; stopAt is its stop point (0:
// none). /leader answers 200 once the child has started.
func (l *listener) holding(h lease.Holder, label string, stopAt time.Duration) {
	l.update(func(s *listenwire.State) {
		s.Role, s.Started, s.StopAt = listenwire.RoleHolding, false, int64(stopAt)
		s.Holder = holderOf(h)
		s.Holder.Label = label
		s.Transitions++
	})
}

// extended moves the stop point after a confirmed renewal.
func (l *listener) extended(stopAt time.Duration) {
	l.update(func(s *listenwire.State) { s.StopAt = int64(stopAt) })
}

// renewed counts a renewal that took took, and failed with err.
func (l *listener) renewed(took time.Duration, err error) {
	l.update(func(s *listenwire.State) {
		switch {
		case err == nil:
			s.Renewals.Observe(took)
			s.LastRenewal = time.Now().Add(-took)
		case !errors.Is(err, lease.ErrLost) && !errors.Is(err, lease.ErrNotHeld):
			s.RenewalsFailed++
		}
	})
}

// role sets the role alone: waiting again after a lease given back
// before the child started, stopping once the child has ended.
func (l *listener) role(r string) {
	l.update(func(s *listenwire.State) { s.Role = r })
}

// started: the child runs.
func (l *listener) started() {
	l.update(func(s *listenwire.State) { s.Started = true })
}

// ended: the run is over, with outcome o and exit code code.
func (l *listener) ended(o lease.Outcome, code int) {
	l.update(func(s *listenwire.State) {
		s.Role, s.Last = listenwire.RoleEnded, &listenwire.Outcome{Outcome: string(o), Code: code}
		if o == lease.OutcomeLost {
			s.Role = listenwire.RoleLost
		}
	})
}

// startListener starts leaderrun-listen for --listen, ahead of the
// store's opening; listenerBound then waits for it to bind.
func (r *runState) startListener() error {
	m := r.rc.Monitor
	if m.Listen == "" {
		return nil
	}
	l, err := spawnListener(m.ListenProgram, listenwire.Hello{Addr: m.Listen, Name: r.rc.Name, Holder: r.rc.Holder, Slots: max(r.rc.Slots, 1)}, r.log)
	r.listen = l
	return err
}

// listenerBound waits for leaderrun-listen to bind --listen's address.
func (r *runState) listenerBound() error {
	if r.listen == nil {
		return nil
	}
	spell := r.rc.Timing.Spell // the command line's, which names every flag
	if spell == nil {
		spell = lease.DashFlag
	}
	addr, err := r.listen.awaitBound(r.rc.Monitor.Listen, spell)
	if err == nil {
		r.log.Info("serving /leader, /status and /metrics on "+addr, "event", "listening", "addr", addr)
	}
	return err
}

// listenWait passes the waiting events on to leaderrun-listen too.
func (r *runState) listenWait(report func(lease.WaitEvent)) func(lease.WaitEvent) {
	if r.listen == nil {
		return report
	}
	return func(ev lease.WaitEvent) {
		r.listen.waitEvent(ev)
		report(ev)
	}
}

// stopAt is ld's stop point, E−K−G on the boot clock; 0 when the lease
// does not expire.
func (r *runState) stopAt(ld *leadership) time.Duration {
	if e, ok := ld.keeper.ValidUntil(); ok {
		return e - r.timing.StopLead()
	}
	return 0
}

// maxSocketPath is the longest path a Unix socket's address holds
// (sun_path, with its NUL).
const maxSocketPath = 107

// ListenAddr checks --listen's address and returns it as leaderrun-listen
// binds it: "unix:PATH", or "host:port" with ":port" meaning 127.0.0.1
// (an endpoint open to every interface is asked for by name: 0.0.0.0:port
// or [::]:port). Port 0 lets the kernel choose; the run logs the port.
// spell names the flag (nil: lease.DashFlag).
func ListenAddr(s string, spell lease.FlagSpeller) (string, error) {
	if spell == nil {
		spell = lease.DashFlag
	}
	what := spell("listen", strconv.Quote(s))
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		if path == "" || len(path) > maxSocketPath || strings.ContainsAny(path, "\x00\n") {
			return "", usagef("%s: want unix:PATH with a path of 1 to %d bytes", what, maxSocketPath)
		}
		return s, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", usagef("%s: want HOST:PORT, :PORT (127.0.0.1) or unix:PATH", what)
	}
	host, port := s[:i], s[i+1:]
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 || port[0] == '+' {
		return "", usagef("%s: the port must be a number from 0 to 65535", what)
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.ContainsAny(inner, " \t\n/[]@?#") || (strings.Contains(inner, ":") && !strings.HasPrefix(host, "[")) {
		return "", usagef("%s: want HOST:PORT with a host name or an address ([::1]:PORT for IPv6)", what)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host + ":" + port, nil
}
