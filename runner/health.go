package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// ErrUnhealthy is the error (and cause) a Health checker reports after
// HealthConfig.Retries failed checks in a row. The concrete error is a
// *HealthError.
var ErrUnhealthy = errors.New("health check failed")

// healthOutputKeep bounds how much of a check's output is kept: only its
// last line is ever shown.
const healthOutputKeep = 4096

// healthLineMax bounds the output line a HealthError shows.
const healthLineMax = 160

// healthWaitDelay bounds how long a check that exited (or was killed) may
// keep its output pipe open through a descendant that left its group.
const healthWaitDelay = 500 * time.Millisecond

// HealthConfig configures StartHealth, with Docker's HEALTHCHECK semantics.
type HealthConfig struct {
	// Cmd is run with /bin/sh -c, in a process group of its own. Required.
	Cmd string
	// Interval is the time from the start (and from the end of each check)
	// to the next check; checks never overlap. Must be positive.
	Interval time.Duration
	// Timeout bounds one check: a check still running then is SIGKILLed
	// with its process group and counts as a failure. Must be positive.
	Timeout time.Duration
	// StartPeriod is the time from the start during which failed checks do
	// not count, unless a check has already succeeded. Zero means none.
	StartPeriod time.Duration
	// Retries is how many failed checks in a row make the checker report
	// ErrUnhealthy. Values below 1 mean 1.
	Retries int
	// Env is the checks' complete environment (the child's); nil means
	// leaderrun's own.
	Env []string
	// OnFail, if not nil, is called once, on the checker's goroutine, with
	// the *HealthError when Retries checks in a row have failed. It must not
	// block.
	OnFail func(error)
	// Log receives a line per failed check (warn) and per passed check
	// (debug). Nil discards them.
	Log *slog.Logger
	// Cgroup, if not nil, is the child's cgroup: each check then runs in
	// a sub-cgroup of it of its own, so what a check leaves behind (even a
	// process that called setsid) is killed when the check ends, and by
	// the guard with the child's tree should leaderrun die. Without it a
	// check runs in a process group of its own, killed when it ends.
	Cgroup *Cgroup
	// Guard, if not nil, is the run's guard: it is told each check's
	// process group while the check runs (Guard.Check), so that it kills
	// the check with the child's tree should leaderrun die, whether or not
	// the check runs in a cgroup.
	Guard *Guard
}

// HealthError describes the failed check that made a Health checker give up.
type HealthError struct {
	// Cmd is the check's command.
	Cmd string
	// Failures is the number of failed checks in a row.
	Failures int
	// Why says how the last check failed: "exit code 1", "timed out after 5s".
	Why string
	// LastLine is the last non-empty line of the last check's output
	// (stdout and stderr together), made printable and truncated; "" if
	// there was none.
	LastLine string
}

// Error describes the failure, naming the check by its program only: the
// rest of a command line may carry a credential.
func (e *HealthError) Error() string {
	s := fmt.Sprintf("health check %s failed %d times in a row (last: %s", CheckName(e.Cmd), e.Failures, e.Why)
	if e.Failures == 1 {
		s = fmt.Sprintf("health check %s failed (%s", CheckName(e.Cmd), e.Why)
	}
	if e.LastLine != "" {
		s += fmt.Sprintf(", output %q", e.LastLine)
	}
	return s + ")"
}

// Is reports that a HealthError is ErrUnhealthy.
func (e *HealthError) Is(target error) bool { return target == ErrUnhealthy }

// CheckName names a check command for messages: its first word, with "…"
// when more follows. Arguments are left out because they may hold a
// password (curl -u user:pw …).
func CheckName(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return `""`
	}
	name := printableLine(f[0], 60)
	if len(f) > 1 {
		name += " …"
	}
	return "(" + name + ")"
}

// Health runs a health check periodically until it is stopped or has failed
// Retries times in a row. The zero value is not usable; call StartHealth.
type Health struct {
	cfg    HealthConfig
	log    *slog.Logger
	checks int // checks run, to name each one's cgroup
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

// StartHealth starts checking with cfg on a goroutine the returned Health
// owns; the first check runs one Interval after the call. Stop must be
// called to end it; cancelling ctx also ends it (a running check is killed).
func StartHealth(ctx context.Context, cfg HealthConfig) *Health {
	if cfg.Retries < 1 {
		cfg.Retries = 1
	}
	h := &Health{cfg: cfg, log: cfg.Log, done: make(chan struct{})}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	ctx, h.cancel = context.WithCancel(ctx)
	go h.loop(ctx)
	return h
}

// Stop ends the checker, killing a running check, and waits for its
// goroutine. Idempotent.
func (h *Health) Stop() {
	h.cancel()
	<-h.done
}

// Err returns the *HealthError once the checker gave up, else nil.
func (h *Health) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *Health) loop(ctx context.Context) {
	defer close(h.done)

	start := time.Now()
	passed := false // a check passed: the start period is over
	failures := 0
	t := time.NewTimer(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		why, line := h.check(ctx)
		if ctx.Err() != nil {
			return // stopped during the check: it says nothing
		}
		switch {
		case why == "":
			passed = true
			failures = 0
			h.log.Debug("health check passed", "event", "health_ok")
		case !passed && time.Since(start) < h.cfg.StartPeriod:
			h.log.Info(fmt.Sprintf("health check %s failed during the start period (%s); not counted", CheckName(h.cfg.Cmd), why),
				"event", "health_start_period", "output", line)
		default:
			failures++
			h.log.Warn(fmt.Sprintf("health check %s failed (%d of %d): %s", CheckName(h.cfg.Cmd), failures, h.cfg.Retries, why),
				"event", "health_failed", "output", line)
			if failures >= h.cfg.Retries {
				err := &HealthError{Cmd: h.cfg.Cmd, Failures: failures, Why: why, LastLine: line}
				h.mu.Lock()
				h.err = err
				h.mu.Unlock()
				if h.cfg.OnFail != nil {
					h.cfg.OnFail(err)
				}
				return
			}
		}
		t.Reset(h.cfg.Interval)
	}
}

// check runs the command once. It returns "" when the check passed, else
// why it failed, and the last line of its output either way.
//
// The check's shell is started with Pdeathsig, as the child is, so the kernel
// kills it should leaderrun die; the guard, told the check's group, kills
// the rest. Pdeathsig fires when the thread that forked the shell exits, and
// a thread ends with a goroutine that exits while locked to it: this
// goroutine keeps the forking thread to itself until the shell is reaped.
//
// Before the guard knows the check's group, a SIGKILL of leaderrun would
// leave what the check forked in that instant (Pdeathsig kills the shell
// only; seen beside stress-ng, where the check ran before the message
// went out). So, without a cgroup (which the guard knows before the check
// starts), the shell first waits at a gate, a pipe that leaderrun writes
// to once the guard has the group, and runs the command only then; if
// leaderrun dies first, the pipe ends and the shell exits without running
// it.
func (h *Health) check(ctx context.Context) (why, line string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	out := &tailBuffer{max: healthOutputKeep}
	cmd := exec.Command("/bin/sh", "-c", h.cfg.Cmd)
	cmd.Env = h.cfg.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cg := h.checkCgroup(cmd) // the check's own cgroup, or nil: its process group only
	if cg != nil {
		defer func() { _ = cg.Remove() }()
	}
	var gate *os.File // leaderrun's end of the gate; nil: no gate
	if h.cfg.Guard != nil && cg == nil {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Sprintf("could not run it: %v", err), ""
		}
		defer r.Close()
		defer w.Close()
		cmd.Args[2] = checkGate + h.cfg.Cmd
		cmd.ExtraFiles, gate = []*os.File{r}, w
	}
	// A check that exited but left a process holding its output is judged
	// by its exit status once the delay passes, not by the open pipe.
	cmd.WaitDelay = healthWaitDelay
	if err := cmd.Start(); err != nil {
		return fmt.Sprintf("could not run it: %v", err), ""
	}
	pgid := cmd.Process.Pid
	h.admit(pgid, gate)
	timedOut := h.awaitCheck(ctx, pgid, cg)
	// The shell has exited but is not reaped yet, so its pid is still its
	// group's ID, which no other group can take: whatever the check left
	// behind goes with it (its group and, with a cgroup, even what left
	// the group), and the guard forgets the group before it can be reused.
	killCheck(pgid, cg)
	if h.cfg.Guard != nil {
		h.cfg.Guard.Checked(pgid)
	}
	err := cmd.Wait()
	return h.verdict(timedOut, cmd.ProcessState, err), lastLine(out.Bytes())
}

// admit lets the started check (the group pgid) run its command: the guard
// is told the group first, then the gate, if any, is opened.
func (h *Health) admit(pgid int, gate *os.File) {
	if h.cfg.Guard != nil {
		if err := h.cfg.Guard.Check(pgid); err != nil {
			h.log.Debug("the guard does not know this health check", "err", err)
		}
	}
	if gate != nil {
		// Opened: the guard has the group (or is gone, which stops the run).
		_, _ = gate.Write([]byte("\n"))
		gate.Close()
	}
}

// verdict says how a check ended, from its process state st and the error
// of its Wait: "" when it passed, else why it failed.
func (h *Health) verdict(timedOut bool, st *os.ProcessState, waitErr error) string {
	switch {
	case timedOut:
		return fmt.Sprintf("timed out after %v; killed", h.cfg.Timeout)
	case st == nil:
		return fmt.Sprintf("could not wait for it: %v", waitErr)
	case st.Exited() && st.ExitCode() == 0:
		return ""
	case st.Exited():
		return fmt.Sprintf("exit code %d", st.ExitCode())
	default:
		return "killed by " + unix.SignalName(st.Sys().(syscall.WaitStatus).Signal())
	}
}

// checkGate is put before the check's command when the check runs in a
// process group only: the shell reads a line from descriptor 3 (the gate,
// which leaderrun writes once the guard knows the group), closes it, and
// runs the command; when the gate ends unopened (leaderrun died) it exits
// 125 without running it.
const checkGate = "IFS= read -r _ <&3 || exit 125\nexec 3<&-\n"

// checkCgroup makes a fresh cgroup for one check, under the run's, and has
// cmd start in it; nil when there is no run cgroup or the new one could not
// be made (the check then runs in a process group of its own). The caller
// removes it after the check: some kernels kill every process later cloned
// into a cgroup that cgroup.kill was once written to.
func (h *Health) checkCgroup(cmd *exec.Cmd) *Cgroup {
	if h.cfg.Cgroup == nil {
		return nil
	}
	h.checks++
	cg, err := h.cfg.Cgroup.Sub(fmt.Sprintf("health-%d", h.checks))
	if err != nil {
		h.log.Debug("this health check runs in a process group of its own", "err", err)
		return nil
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(cg.fd.Fd())
	return cg
}

// awaitCheck waits until the check's shell (pgid, the leader of its group)
// has exited, unreaped; it kills the check when its timeout passes (and
// then reports true) or ctx is done.
func (h *Health) awaitCheck(ctx context.Context, pgid int, cg *Cgroup) (timedOut bool) {
	exited := make(chan struct{})
	go func() { // owned by awaitCheck, which waits for it below
		defer close(exited)
		awaitExit(pgid)
	}()
	timer := time.NewTimer(h.cfg.Timeout)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		timedOut = true
		killCheck(pgid, cg)
		<-exited
	case <-ctx.Done():
		killCheck(pgid, cg)
		<-exited
	}
	return timedOut
}

// awaitExit returns once child pid has exited, leaving it unreaped
// (waitid with WNOWAIT) for exec.Cmd.Wait.
func awaitExit(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// killCheck SIGKILLs what a check runs: its process group and, with a cgroup,
// every process in the check's cgroup, then waits (briefly) for that cgroup
// to empty, so that it can be removed.
func killCheck(pgid int, cg *Cgroup) {
	_ = unix.Kill(-pgid, unix.SIGKILL)
	if cg == nil {
		return
	}
	_ = cg.Kill()
	deadline := time.Now().Add(KillConfirmWait)
	for pop, err := cg.Populated(); err == nil && pop && time.Now().Before(deadline); pop, err = cg.Populated() {
		time.Sleep(time.Millisecond) // cgroup.events has no event we could await here cheaply
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.b)
}

// lastLine returns the last non-blank line of out, printable and truncated.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\r\n\t "), "\n")
	return printableLine(strings.TrimSpace(lines[len(lines)-1]), healthLineMax)
}

// printableLine replaces control characters and invalid UTF-8 in s with '?'
// (a terminal must not interpret them) and cuts it to at most max bytes,
// marking the cut with "…".
func printableLine(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || unicode.IsControl(r) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		i += n
	}
	return b.String()
}
