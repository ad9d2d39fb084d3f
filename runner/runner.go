// Package runner starts the leader's command, its health checks and the
// guard, and is the only code in leaderrun that signals or kills processes
// (cmd replaces its own image with a store program by execve, and the file
// store runs getent; neither is supervised).
//
// The command runs in its own process group, and every signal or kill goes to
// the whole group (-pgid), so shells, pipelines and their children are
// stopped together. Run forwards INT, TERM, HUP, QUIT, USR1, USR2 and WINCH
// to the group (never SIGCHLD or Go's SIGURG). A forwarded INT, TERM, HUP,
// QUIT or stop signal is followed by SIGCONT if a member of the group is
// stopped, so that it can act on it. A forwarded INT, TERM or stop signal is
// a request to stop, as with timeout -k: if the command has not exited when
// the grace runs out, the group is SIGKILLed, and a second one SIGKILLs it at
// once. HUP, QUIT and the rest are only forwarded (daemons reload on HUP,
// runtimes dump threads on QUIT). Cancellation of Run's context starts the
// stop sequence: the stop signal, then SIGCONT (as systemd does), to the
// group and, after the grace, SIGKILL (and SIGCONT) to the group, on a timer
// that nothing else can delay.
//
// When the command's process exits by itself, processes it left in its group
// are stopped the same way. Run returns only once the group is confirmed gone
// (kill(-pgid, 0) reports ESRCH, or every remaining member is a zombie that
// nobody reaps) or, after SIGKILL and a bounded wait, cannot be confirmed gone
// (Result.GroupGone false): the caller then keeps its lease until the TTL ends.
//
// The child is started with Pdeathsig SIGKILL, so if leaderrun itself is
// SIGKILLed the kernel kills the child. Pdeathsig fires when the thread that
// forked the child exits, not the process (golang/go#27505), so the child is
// started and waited for on a goroutine locked to its OS thread that never
// unlocks: that thread lives exactly as long as the child.
//
// Terminal and job control. When leaderrun has a controlling terminal, is
// in its foreground, and is a job of the shell in charge of it (its stdin is
// that terminal, or a job-control shell gave it a process group of its own,
// as for cat f | leaderrun -- less), the child's group becomes the
// foreground group, so the child can read the terminal and Ctrl-C reaches it
// directly; leaderrun takes the foreground back when the child exits, if the
// child's group still has it, and, if the child died by a signal or was
// stopped, restores the terminal settings it found. A background job of a
// shell without job control (leaderrun … & in a script, nohup) shares the
// script's foreground group but leaves the terminal alone. Run follows the child's
// job control as sudo does, seeing its stops with wait4(WUNTRACED) on the
// locked goroutine: when the child stops on SIGTSTP (Ctrl-Z), SIGTTIN or
// SIGTTOU (a background read or write of the terminal), or in any way while
// it holds the terminal, leaderrun takes the terminal back (and the shell's
// settings, keeping the child's for later) and stops itself with SIGTSTP, so
// the shell sees its job stopped. On SIGCONT (fg, bg, kill %1) leaderrun
// gives the terminal back to the child's group if it is in the foreground
// again (with the child's settings) and continues the group. While stopped,
// leaderrun renews nothing. It does not stop itself when it cannot be
// continued by a shell (an orphaned process group, SIGTSTP ignored): then
// Ctrl-Z is undone, as the kernel does for such a job, and other stops stay
// until a forwarded signal or the stop sequence ends the group. Run catches
// SIGTTIN and SIGTTOU during the call: sent to leaderrun's own group by the
// other commands of a pipeline that touch the terminal the child holds
// (leaderrun -- make | less), they would otherwise stop leaderrun while the
// child runs; those commands are continued when leaderrun takes the terminal
// back. SIGTSTP must keep its default action: do not signal.Notify it.
//
// Before the child starts, the caller may start a Guard: a second process
// that knows the child's process group (or cgroup) and the lease's deadlines
// and enforces them should leaderrun die or freeze (see Guard). Where a cgroup
// v2 subtree is writable, the child may be started inside a Cgroup of its own,
// so that descendants that leave the process group are stopped too.
//
// What is not guaranteed:
//   - Without a cgroup, a descendant that leaves the group (setsid, setpgid)
//     escapes every signal and kill; and in the instant between the child's
//     exec and Guard.Arm, a SIGKILL of leaderrun leaves only Pdeathsig, which
//     covers the direct child only.
//   - Pdeathsig is cleared when the child execs a set-user-ID or
//     capability-carrying binary.
//   - With the terminal's TOSTOP flag set, leaderrun's own log lines stop it
//     while the child is in the foreground. While the child holds the
//     terminal, other commands of leaderrun's pipeline cannot read it.
//   - A SIGSTOP or SIGTSTP sent to leaderrun alone stops it while the child
//     runs on (and the lease is no longer renewed).
//   - After the child has been waited for, its process-group ID could in
//     principle be reused by a new, unrelated group leader once the group is
//     empty; Run signals the group after that point only when it has just
//     seen members in it.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultStopSignal is the stop signal used when Config.StopSignal is zero.
const DefaultStopSignal = syscall.SIGTERM

// KillConfirmWait bounds how long Run waits, after sending SIGKILL to the
// group, for the group to vanish before reporting GroupGone false.
const KillConfirmWait = 500 * time.Millisecond

// ForwardedSignals are the signals Run forwards to the child's process group,
// less those leaderrun inherited as ignored (InheritedIgnored).
var ForwardedSignals = forwardable()

// InheritedIgnored lists the signals that were ignored when leaderrun
// started: nohup(1)'s SIGHUP, and the SIGINT a non-interactive shell
// ignores for a background job. They stay ignored, for leaderrun (never
// caught, so never forwarded) and for the child, which inherits SIG_IGN
// through execve, as nohup, timeout(1) and env(1) keep them. Go's runtime
// reports an inherited SIG_IGN for SIGHUP and SIGINT only; it installs its
// own handler for SIGQUIT whatever it inherited.
var InheritedIgnored []os.Signal

// forwardable computes ForwardedSignals and InheritedIgnored at package
// initialisation, before any signal.Notify could un-ignore a signal.
func forwardable() []os.Signal {
	var fwd []os.Signal
	for _, s := range []os.Signal{
		syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
	} {
		if signal.Ignored(s) {
			InheritedIgnored = append(InheritedIgnored, s)
			continue
		}
		fwd = append(fwd, s)
	}
	return fwd
}

// Config describes the command to run. The zero value of every field except
// Args is usable.
type Config struct {
	// Args is the command and its arguments. Args[0] is resolved with Resolve
	// (exec.LookPath rules); no shell is involved. Required.
	Args []string
	// Env is the child's complete environment; nil means leaderrun's own
	// environment (as in os/exec).
	Env []string
	// StopSignal is sent to the group when the context is cancelled, and to
	// leftovers after the child exits. Zero means DefaultStopSignal (SIGTERM).
	StopSignal syscall.Signal
	// Grace is the delay between StopSignal and SIGKILL, and between a
	// forwarded INT, TERM or StopSignal and SIGKILL. Zero (or negative) means
	// SIGKILL follows at once; the caller picks the grace because it must fit
	// before the lease's kill point.
	Grace time.Duration
	// Signals, if not nil, delivers signals the caller has already caught
	// with signal.Notify; Run forwards each to the group while the child runs
	// (SIGCHLD and SIGURG are never forwarded). Run does not close or drain it
	// after the child exits. If nil, Run calls signal.Notify itself for
	// ForwardedSignals for the duration of the call.
	Signals <-chan os.Signal
	// KeepSignalsCaught leaves the job-control signals Run catches
	// (notifyJobSignals, notifyContinue) caught when it returns, for a
	// caller that exits right after: giving a signal back (signal.Stop)
	// costs a round trip to the Go runtime's signal-mask thread each
	// (docs/performance.md, start-up cost).
	// One arriving after Run returned is then dropped. A process that calls
	// Run again keeps one registration per call, so callers that live on
	// leave it false.
	KeepSignalsCaught bool
	// Stdin, Stdout and Stderr are passed to the child as they are (inherited
	// descriptors, no copying). Nil means os.Stdin, os.Stdout, os.Stderr.
	Stdin, Stdout, Stderr *os.File
	// Log receives debug lines for routine events and info/warn lines for
	// stops and kills. Nil discards them.
	Log *slog.Logger
	// KillNow, if not nil, is closed when the group must be SIGKILLed at once
	// whatever the grace timer says: the lease's kill point E−K, computed on
	// a clock that counts through suspend. If the stop sequence has not begun,
	// closing it begins and ends it.
	KillNow <-chan struct{}
	// Cgroup, if not nil, is an empty cgroup the child is started in
	// (clone3 CLONE_INTO_CGROUP), so that every descendant stays in it: the
	// stop sequence then signals every process of the cgroup, SIGKILL is
	// cgroup.kill, and the tree is gone only when the cgroup is empty. Run
	// does not remove it.
	Cgroup *Cgroup
	// Guard, if not nil, is told the child's process group the moment the
	// child has started, when Run begins the stop sequence itself, and when
	// the tree is confirmed gone (see Guard).
	Guard *Guard
	// Started, if not nil, is called on Run's goroutine with the child's
	// PID once the child has started (after Guard.Arm), before Run watches
	// ctx: the moment to report readiness or start health checks. It must
	// not block. at is the time read right before the child was started,
	// so never after the child's own start: a run timed from it is never
	// shorter than the child's (on a loaded host the child had slept 9 ms
	// of its 200 before Started was called, and its run was reported as
	// 191 ms).
	Started func(pid int, at time.Time)
	// Exited, if not nil, is called on Run's goroutine once the child has
	// exited and before the processes it left are swept: the moment to
	// stop health checks, whose processes in the child's cgroup would
	// otherwise be taken for leftovers. It may block briefly.
	Exited func()
	// MayStart, if not nil, is called right before the child is started;
	// an error means it is not, and Run returns the error wrapped (the
	// lease's stop point passed on the way to the start, which a CPU limit
	// can make seconds long, before a watchdog could cancel ctx).
	MayStart func() error
}

// Result says how the child ended.
type Result struct {
	// PID is the child's process ID, which is also its process-group ID; 0 if
	// no process was started.
	PID int
	// Code is the exit code to pass on: the child's own 0–255, or 128+N if it
	// died by signal N.
	Code int
	// Signal is the signal that killed the child, or 0 if it exited.
	Signal syscall.Signal
	// Stopped is true when Run stopped the child because ctx was cancelled.
	Stopped bool
	// Killed is true when SIGKILL was sent to the group: in the stop
	// sequence, to clear leftovers, or after a forwarded INT, TERM or stop
	// signal that was not obeyed within the grace or came twice.
	Killed bool
	// KillPoint is true when that SIGKILL came from Config.KillNow (the
	// lease's kill point) rather than from the grace timer.
	KillPoint bool
	// KillAfter is the time from the stop signal to that SIGKILL; zero when
	// both were sent at once (the kill point came before any stop signal).
	KillAfter time.Duration
	// GroupGone is true when the whole process group was confirmed gone before
	// Run returned. When false, processes of the group may still run.
	GroupGone bool
}

// Run starts cfg.Args in a new process group and blocks until the child has
// exited and its process group is gone or cannot be confirmed gone (see the
// package comment). Cancelling ctx stops the group: StopSignal, then SIGKILL
// after Grace; Run then returns a nil error with Result.Stopped set, and the
// caller reads the reason from context.Cause.
//
// If the command cannot be started, Run returns an error wrapping ErrNotFound
// or ErrNotExecutable (or another start error) and Result.PID is 0. If ctx is
// already done, nothing is started and the error wraps context.Cause(ctx).
func Run(ctx context.Context, cfg Config) (Result, error) {
	if len(cfg.Args) == 0 {
		return Result{}, errors.New("no command given")
	}
	path, err := Resolve(cfg.Args[0])
	if err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil {
		return Result{}, fmt.Errorf("%s not started: %w", cfg.Args[0], context.Cause(ctx))
	}
	r := newRun(cfg)
	sigs := cfg.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 16)
		signal.Notify(ch, ForwardedSignals...)
		defer signal.Stop(ch)
		sigs = ch
	}
	term := r.openTerminal()
	defer term.close()
	cmd := r.command(path, term)
	r.notifyJobSignals()
	if !cfg.KeepSignalsCaught {
		defer signal.Stop(r.jobSigs)
	}

	if err := mayStart(cfg); err != nil {
		return Result{}, err
	}
	at := time.Now()
	pid, exited, states, err := start(cmd, cfg.Guard)
	if err != nil {
		// The child may have made itself the foreground group before its
		// exec failed.
		if err := term.restore(-1, false); err != nil {
			term.logErr(r.log, err)
		}
		return Result{}, classifyStartErr(cfg.Args[0], err)
	}
	r.notifyContinue()
	r.pgid = pid
	r.res.PID = r.pgid
	r.log = r.log.With("pid", r.pgid)
	r.log.Debug("child started", "path", path, "foreground", term != nil && term.handed)
	if cfg.Started != nil {
		cfg.Started(r.pgid, at)
	}
	defer r.stopTimers()

	w := r.supervise(ctx, exited, states, sigs)
	return r.finish(w, term)
}

// finish ends a run whose child has exited (w): the terminal back, the
// group swept, and the result.
func (r *run) finish(w waitResult, term *terminal) (Result, error) {
	cfg := r.cfg
	r.exitedWith(w)
	if err := term.restore(r.pgid, r.res.Signal != 0 || r.res.Stopped); err != nil {
		term.logErr(r.log, err)
	}
	if cfg.Exited != nil {
		cfg.Exited()
	}
	r.sweep()
	if r.res.GroupGone && cfg.Guard != nil {
		cfg.Guard.Gone()
	}
	if w.err != nil {
		return r.res, fmt.Errorf("wait for %s: %w", cfg.Args[0], w.err)
	}
	return r.res, nil
}

// openTerminal takes the controlling terminal for the run, if it is
// leaderrun's to use (nil otherwise, with the reason in r.jobless).
func (r *run) openTerminal() *terminal {
	term, jobless := openTerminal()
	r.term, r.jobless = term, jobless
	if jobless != "" {
		r.log.Debug("terminal left alone", "reason", jobless)
	}
	return term
}

// childProc is how the child is started: its program, arguments,
// environment, descriptors and process attributes.
type childProc struct {
	path  string
	args  []string
	env   []string
	files []*os.File
	sys   *syscall.SysProcAttr
}

// command is the child's childProc: a process group of its own, SIGKILL
// when this thread dies, the cgroup and the terminal's foreground when
// there are.
func (r *run) command(path string, term *terminal) *childProc {
	cfg := r.cfg
	cmd := &childProc{
		path:  path,
		args:  cfg.Args,
		env:   cfg.Env,
		files: []*os.File{r.stdin, orDefault(cfg.Stdout, os.Stdout), orDefault(cfg.Stderr, os.Stderr)},
		sys: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if cfg.Cgroup != nil && cfg.Cgroup.fd != nil {
		cmd.sys.UseCgroupFD = true
		cmd.sys.CgroupFD = int(cfg.Cgroup.fd.Fd())
	}
	if term.prepareStart() {
		cmd.sys.Foreground = true
		cmd.sys.Ctty = term.fd
	}
	return cmd
}

// start starts cmd on a thread locked for the child's life (Pdeathsig is
// per thread) and arms guard with its group at once: until the guard knows
// the group, a SIGKILL of leaderrun would leave the tree to Pdeathsig. The
// goroutine, owned by Run, then waits for the child: exited receives its
// end, states its stops and continues. It returns the child's PID.
func start(cmd *childProc, guard *Guard) (int, <-chan waitResult, <-chan childState, error) {
	type startResult struct {
		pid int
		err error
	}
	started := make(chan startResult, 1)
	exited := make(chan waitResult, 1)
	states := make(chan childState)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread must outlive the child
		pid, err := spawn(cmd.path, cmd.args, cmd.env, "", cmd.files, cmd.sys)
		if err != nil {
			started <- startResult{err: err}
			return
		}
		if guard != nil {
			_ = guard.Arm(pid)
		}
		started <- startResult{pid: pid}
		exited <- waitChild(pid, states)
	}()
	s := <-started
	if s.err != nil {
		return 0, nil, nil, s.err
	}
	return s.pid, exited, states, nil
}

// exitedWith records how the child ended.
func (r *run) exitedWith(w waitResult) {
	if w.err == nil {
		if w.status.Signaled() {
			r.res.Signal = w.status.Signal()
			r.res.Code = 128 + int(w.status.Signal())
		} else {
			r.res.Code = w.status.ExitStatus()
		}
	}
	if r.res.Signal != 0 {
		r.log.Debug("child exited", "code", r.res.Code, "signal", r.res.Signal)
	} else {
		r.log.Debug("child exited", "code", r.res.Code)
	}
}

// run is the state of one Run call; only Run's goroutine touches it.
type run struct {
	cfg       Config
	stdin     *os.File
	log       *slog.Logger
	pgid      int
	res       Result
	stopping  bool
	killTimer *time.Timer // armed by stop or a forwarded stop signal: fires SIGKILL after the grace
	killC     <-chan time.Time
	killNow   <-chan struct{} // Config.KillNow until it fired
	stopAt    time.Time       // when the stop signal was sent
	term      *terminal       // the controlling terminal, or nil
	jobless   string          // why the controlling terminal is not leaderrun's to use, or ""

	childStopped bool           // the child was last reported stopped, not continued
	suspended    bool           // leaderrun stopped itself with the child, and was not continued since
	jobSigs      chan os.Signal // SIGCONT, SIGTTIN and SIGTTOU, caught during the call
	contCaught   bool           // SIGCONT is caught already (notifyJobSignals)
}

func newRun(cfg Config) *run {
	if cfg.StopSignal == 0 {
		cfg.StopSignal = DefaultStopSignal
	}
	if cfg.Grace < 0 {
		cfg.Grace = 0
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &run{cfg: cfg, stdin: orDefault(cfg.Stdin, os.Stdin), log: log, killNow: cfg.KillNow}
}

func orDefault(f, def *os.File) *os.File {
	if f == nil {
		return def
	}
	return f
}

// supervise forwards signals, follows the child's stops (job control) and
// runs the stop sequence until the child (the group leader) has been waited
// for; it returns how the child ended.
func (r *run) supervise(ctx context.Context, exited <-chan waitResult, states <-chan childState,
	sigs <-chan os.Signal) waitResult {
	done := ctx.Done()
	for {
		// An exit that is already known wins over everything else: after the
		// leader is reaped, its group ID must not be signalled blindly.
		select {
		case w := <-exited:
			return w
		default:
		}
		// Then signals already caught: a TERM sent with the shell's SIGCONT
		// (kill %1) must reach the group before a stop of the child could
		// stop leaderrun again.
		select {
		case s := <-sigs:
			r.forward(s)
			continue
		default:
		}
		select {
		case w := <-exited:
			return w
		case <-done:
			done = nil
			r.res.Stopped = true
			r.log.Info("stopping child", "signal", r.cfg.StopSignal,
				"grace", r.cfg.Grace, "cause", context.Cause(ctx))
			r.stop()
		case <-r.killC:
			r.kill("grace expired")
		case <-r.killNow:
			r.killAtDeadline()
		case s := <-sigs:
			r.forward(s)
		case st := <-states:
			r.childChanged(st)
		case s := <-r.jobSigs:
			r.jobSignal(s)
		}
	}
}

// forward sends a signal leaderrun caught to the group. After INT, TERM, HUP,
// QUIT or the stop signal, a stopped group is continued so that it can act
// on it. INT, TERM and the stop signal also start the grace, as timeout -k
// does: if the child has not exited when it runs out, the group is SIGKILLed;
// a second one (or one during the stop sequence) SIGKILLs it at once.
func (r *run) forward(s os.Signal) {
	sig, ok := s.(syscall.Signal)
	if !ok || sig == syscall.SIGCHLD || sig == syscall.SIGURG {
		return
	}
	r.log.Debug("forwarding signal", "signal", sig)
	if err := signalGroup(r.pgid, sig); err != nil {
		r.log.Warn("could not forward a signal", "signal", sig, "err", err)
	}
	if !r.terminating(sig) {
		return
	}
	if r.childStopped || groupStopped(r.pgid) {
		r.continueGroup()
	}
	switch {
	case !r.escalates(sig) || r.res.Killed:
	case r.killC != nil:
		r.kill("second stop signal (" + unix.SignalName(sig) + ")")
	default:
		r.log.Info("forwarded a stop signal; SIGKILL follows if the child has not exited after the grace",
			"signal", sig, "grace", r.cfg.Grace)
		r.armKill()
	}
}

// stop sends the stop signal to the group, then SIGCONT (as systemd does: a
// stopped process acts on the stop signal only once continued), and arms the
// SIGKILL timer unless a forwarded stop signal has armed it already.
func (r *run) stop() {
	r.stopping = true
	r.stopAt = time.Now()
	if r.cfg.Guard != nil {
		r.cfg.Guard.Stopping()
	}
	if err := r.signalTree(r.cfg.StopSignal); err != nil {
		r.log.Warn("could not send the stop signal", "signal", r.cfg.StopSignal, "err", err)
	}
	if r.cfg.StopSignal != syscall.SIGCONT && r.cfg.StopSignal != syscall.SIGKILL {
		r.continueGroup()
	}
	if r.killC == nil && !r.res.Killed {
		r.armKill()
	}
}

func (r *run) armKill() {
	if r.stopAt.IsZero() {
		r.stopAt = time.Now() // the first stop or forwarded stop signal
	}
	r.killTimer = time.NewTimer(r.cfg.Grace)
	r.killC = r.killTimer.C
}

// killAtDeadline handles KillNow: the lease's kill point has come.
func (r *run) killAtDeadline() {
	r.killNow = nil
	atOnce := !r.stopping
	if atOnce {
		r.res.Stopped = true
		r.stop()
	}
	if !r.res.Killed {
		r.res.KillPoint = true
		r.kill("lease kill point reached")
		if atOnce {
			r.res.KillAfter = 0
		}
	}
}

// kill sends SIGKILL to the group, then SIGCONT, as systemd does (the kernel
// ends a stopped process on SIGKILL anyway; the SIGCONT is harmless).
func (r *run) kill(reason string) {
	r.killC = nil
	r.res.Killed = true
	r.res.KillAfter = time.Since(r.stopAt)
	r.log.Warn("killing the child's processes: "+reason, "grace", r.cfg.Grace)
	if err := r.signalTree(syscall.SIGKILL); err != nil {
		r.log.Warn("could not send SIGKILL", "err", err)
	}
	_ = signalGroup(r.pgid, syscall.SIGCONT)
}

// tree is the child's process tree.
func (r *run) tree() tree { return tree{pgid: r.pgid, cg: r.cfg.Cgroup} }

// signalTree sends sig to the child's tree: SIGKILL to every process of it
// (cgroup.kill, plus the group as a backstop), any other signal once to
// each process (see tree.signal).
func (r *run) signalTree(sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return r.tree().kill()
	}
	return r.tree().signal(sig)
}

// treeAlive reports whether anything of the child's tree may still run.
func (r *run) treeAlive() bool { return r.tree().alive() }

func (r *run) stopTimers() {
	if r.killTimer != nil {
		r.killTimer.Stop()
	}
}

// sweep runs after the leader has been waited for: it stops leftovers in the
// group (unless the stop sequence is already running) and waits until the
// group is gone, or until KillConfirmWait after SIGKILL.
func (r *run) sweep() {
	alive := r.treeAlive()
	if alive && !r.stopping {
		r.log.Info("child exited; stopping the processes it left behind",
			"signal", r.cfg.StopSignal, "grace", r.cfg.Grace)
		r.stop()
	}
	var confirmC <-chan time.Time
	if alive && r.res.Killed {
		confirmC = time.After(KillConfirmWait)
	}
	poll := time.Millisecond
	pollT := time.NewTimer(poll)
	defer pollT.Stop()
	for alive {
		select {
		case <-r.killNow:
			r.killAtDeadline()
			if confirmC == nil {
				confirmC = time.After(KillConfirmWait)
			}
		case <-r.killC:
			r.kill("grace expired")
			confirmC = time.After(KillConfirmWait)
		case <-confirmC:
			r.log.Warn("the child's processes not confirmed gone after SIGKILL",
				"waited", KillConfirmWait)
			r.res.GroupGone = false
			return
		case <-pollT.C:
			alive = r.treeAlive()
			poll = min(2*poll, 20*time.Millisecond)
			pollT.Reset(poll)
		}
	}
	r.res.GroupGone = true
	r.log.Debug("the child's processes are gone")
}
