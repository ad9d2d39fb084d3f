package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/listenwire"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// The phases of a run (Run): prepare, lead, supervise, finish.

// runState is what a run prepared: its flags, the opened store and the
// resolved timing, and the signal watch that holds INT, TERM, HUP and QUIT
// until the child starts. close undoes what prepare set up.
type runState struct {
	rc     Config
	args   []string
	log    *slog.Logger
	timing lease.Timing
	mon    *monitor
	reads  *envReads // what the store consumed stays out of the child's environment

	// What close undoes, in the order prepare sets them up.
	sigs   chan os.Signal
	winch  bool        // SIGWINCH is forwarded: caught once the child runs
	pre    *guardStart // the guard started ahead; a retry starts another
	store  lease.Store
	notify *notifier
	watch  *signalWatch
	listen *listener // --listen; nil: none
	pods   *podLabel // --pod-label; nil: none
}

// close undoes prepare, last first; a field prepare did not reach is
// nil.
func (r *runState) close() {
	r.listen.close()
	if r.watch != nil {
		r.watch.cancel(nil)
	}
	r.notify.close()
	if r.store != nil {
		_ = r.store.Close()
	}
	if r.pre != nil {
		r.pre.drop() // the current one
	}
	// r.sigs stays registered: leaderrun exits once the run is over, and
	// giving each caught signal back (signal.Stop) would cost a round trip
	// to the Go runtime's signal-mask thread per signal (docs/performance.md).
	// A signal in those last moments is dropped, as during the release. A
	// process that runs Main more than once (tests) keeps one registration
	// per run.
}

// catchSignals starts the guard and catches the forwarded signals for the
// whole run (while waiting, INT, TERM and HUP end the wait; once the child
// runs, the runner forwards them), and SIGPIPE (keepStderrFromKilling).
// SIGWINCH, whose default action is none, is caught only once the child
// has started (supervise): until then there is nobody to pass a resize on
// to, and catching it before the child's start delayed that start.
// SIGHUP is caught only once the guard has been forked, and ignored until
// then (as before it was caught at all), so that the
// guard inherits SIG_IGN for it and is never killed by it
// (runner.Guard.IgnoresHangup): a guard stopped when leaderrun dies gets
// SIGHUP with the SIGCONT that wakes it.
//
// The guard's start comes first: catching a signal costs a round trip to
// the Go runtime's signal-mask thread (docs/performance.md), and these
// then overlap the guard's fork and exec instead of delaying them, which
// the child's start waits for. A signal in between gets its default
// action, as one before catchSignals always did: nothing has started.
func (r *runState) catchSignals() {
	r.sigs = make(chan os.Signal, 16)
	var rest []os.Signal
	hup := false
	for _, s := range runner.ForwardedSignals {
		switch s {
		case syscall.SIGHUP:
			hup = true
		case syscall.SIGWINCH:
			r.winch = true
		default:
			rest = append(rest, s)
		}
	}
	if !hup { // ignored since leaderrun started (nohup)
		r.pre = startGuardAsync(r.rc.GuardProgram, r.rc.GuardTrusted, nil)
	} else {
		signal.Ignore(syscall.SIGHUP)
		r.pre = startGuardAsync(r.rc.GuardProgram, r.rc.GuardTrusted, func() { signal.Notify(r.sigs, syscall.SIGHUP) })
	}
	signal.Notify(r.sigs, rest...)
	keepStderrFromKilling()
}

// hupCaught holds a waiting event back until SIGHUP is caught again
// (catchSignals): whoever reads "waiting" may send it, to end the wait.
func (r *runState) hupCaught(report func(lease.WaitEvent)) func(lease.WaitEvent) {
	pre := r.pre
	return func(ev lease.WaitEvent) {
		pre.forked()
		report(ev)
	}
}

// prepare checks everything that can be checked before a lease is
// taken, opens the store and resolves the timing. On a non-nil outcome
// nothing is left to close.
func prepare(ctx context.Context, rc Config) (_ *runState, o *Outcome) {
	args, log := rc.Args, rc.Log
	// A command that cannot run is refused before any lease is taken.
	if _, err := runner.Resolve(args[0]); err != nil {
		return nil, Classify(err)
	}
	if err := checkContain(rc.Contain); err != nil {
		return nil, Classify(err)
	}
	r := &runState{rc: rc, args: args, log: log, mon: newMonitor(rc.Monitor, log)}
	defer func() {
		if o != nil {
			r.close()
		}
	}()
	r.catchSignals()
	if err := r.startListener(); err != nil {
		return nil, Classify(err)
	}
	r.reads = newEnvReads(rc.Getenv)
	store, err := rc.OpenStore(ctx, lease.OpenOptions{CallTimeout: provisionalCallTimeout(rc.Timing), Getenv: r.reads.get, Log: log})
	if err != nil {
		return nil, Classify(err) // store may be a typed nil: not one to close
	}
	r.store = store
	if err := r.listenerBound(); err != nil {
		return nil, Classify(err)
	}
	r.notify = newNotifier(r.reads.get, log)
	// Timing is validated as for an expiring store even when this one does
	// not expire (file): a command line that works here must not be refused
	// when the same job moves to Redis or Azure.
	vlim := r.store.Limits()
	if !vlim.Expires {
		vlim = lease.Limits{Expires: true, Epsilon: 5 * time.Millisecond}
	}
	// A CPU limit on our cgroup can hold the kill back: the kill bound grows.
	rc.Timing.Stall, rc.Timing.StallCause = runner.CPULimitStall()
	if r.timing, err = rc.Timing.Resolve(vlim); err != nil {
		return nil, Classify(err)
	}
	if r.pods, err = openPodLabel(r.store, rc.Monitor.PodLabel, 3*r.timing.CallTimeout, log); err != nil {
		return nil, Classify(err)
	}
	log.Debug("timing", "ttl", r.timing.TTL, "renew_every", r.timing.RenewEvery, "grace", r.timing.Grace, "call_timeout", r.timing.CallTimeout, "kill_bound", r.timing.KillBound)
	reportShrunkGrace(log, rc.Timing, r.timing)
	for _, w := range rc.Warnings {
		log.Warn(w.Msg, "event", w.Event)
	}
	// Until the child starts, INT, TERM, HUP and QUIT mean "don't start it".
	r.watch = watchSignals(ctx, r.sigs)
	return r, nil
}

// leadership is a lease taken, enforced by the guard (and the child's
// cgroup) and kept by a keeper: from here on the child's tree is enforced
// even if leaderrun dies or freezes.
type leadership struct {
	l      lease.Lease
	info   lease.Holder
	prot   *protection
	keeper *lease.Keeper
	// sentAt is when the granted acquisition request was sent.
	sentAt time.Duration
	// waited is how long this run waited for the lease.
	waited time.Duration
	// periodStart and periodEnd are the --once-per period this run is
	// for (oncePerDone); zero without --once-per.
	periodStart, periodEnd time.Time
}

// left is how long ld's lease is certainly still ours, as its keeper knows
// it; ttl for a lease that does not expire or has no keeper yet.
func (ld *leadership) left(ttl time.Duration) time.Duration {
	if ld.keeper != nil {
		if e, ok := ld.keeper.ValidUntil(); ok {
			return e - lease.BootClock{}.Now()
		}
	}
	return ttl
}

// lead acquires the lease, starts its protection and its keeper. A lease
// granted too late to keep, or whose first renewal went unanswered
// (lease.WaitAgain), is abandoned and waited for again while --wait allows.
// A non-nil outcome ends the run: the lease, if it was taken, is released.
func (r *runState) lead(ctx context.Context) (*leadership, *Outcome) {
	began := time.Now()
	for {
		ld, err := r.acquire(began)
		if err != nil {
			r.watch.stop()
			o := acquireOutcome(err, r.rc)
			if errors.As(err, new(*lease.HeldError)) {
				r.mon.skipped(r.rc.Name, o.Msg)
			}
			return nil, o
		}
		err = r.enforce(ld)
		// Only the keeper's refusal is waited out; a protection that
		// failed (ld.prot nil) ends the run.
		if err != nil && ld.prot != nil && r.mayWaitAgain(err, began) {
			r.log.Warn(fmt.Sprintf("lease %s could not be kept long enough to start %s; releasing it and waiting again", r.rc.Name, r.args[0]), "err", err)
			r.abandon(ld)
			r.pre = startGuardAsync(r.rc.GuardProgram, r.rc.GuardTrusted, nil)
			continue
		}
		r.watch.stop()
		var o *Outcome
		switch {
		case ld.prot != nil && r.watch.signalled(): // while the lease was being kept
			o = acquireOutcome(context.Cause(r.watch.ctx), r.rc)
		case err != nil:
			o = Classify(err)
		default:
			if e, ok := ld.keeper.ValidUntil(); ok {
				ld.prot.guard.Until(e)
			}
			r.listen.holding(ld.info, r.rc.Holder, r.stopAt(ld))
			return ld, nil
		}
		r.abandon(ld)
		return nil, notStarted(r.record(ld), o)
	}
}

// acquire waits for the lease for what is left of --wait since began.
func (r *runState) acquire(began time.Time) (*leadership, error) {
	rc, log := r.rc, r.log
	wait := rc.Wait
	if wait != lease.WaitForever {
		wait = max(rc.Wait-time.Since(began), 0)
	}
	acq, err := lease.Acquire(r.watch.ctx, r.store, lease.Request{Name: rc.Name, Label: rc.Holder, TTL: r.timing.TTL, Slots: rc.Slots},
		lease.AcquireOptions{Wait: wait, CallTimeout: r.timing.CallTimeout, Log: log,
			OnWait:      r.listenWait(r.hupCaught(refuseOwnAncestor(r.rc.Getenv, rc, r.watch.cancel, notifyWaiting(r.notify, rc.Name, waitReporter(log, rc.Name, wait))))),
			RemindEvery: cmp.Or(rc.RemindEvery, time.Minute), Priority: rc.Priority, PriorityStep: rc.PriorityStep})
	if err != nil {
		return nil, err
	}
	ld := &leadership{l: acq.Lease, info: acq.Lease.Info(), sentAt: acq.SentAt, waited: time.Since(began)}
	log.Info(acquiredText(rc.Name, acq.Waited), append([]any{"token", ld.info.Token, "holder", rc.Holder}, slotAttrs(ld.info)...)...)
	return ld, nil
}

// enforce starts ld's protection, the guard (and the child's cgroup), which
// come before the child, then its keeper. Whatever it started is in ld.
func (r *runState) enforce(ld *leadership) error {
	prot, err := protect(ld.l, r.pre, r.rc.Contain, r.rc.StopSignal, r.timing, r.log)
	if err != nil {
		return err
	}
	ld.prot = prot
	onExtend, onRenew := prot.guard.Until, (func(time.Duration, error))(nil)
	if l := r.listen; l != nil {
		onExtend = func(e time.Duration) {
			prot.guard.Until(e)
			l.extended(e - r.timing.StopLead())
		}
		onRenew = l.renewed
	}
	ld.keeper, err = lease.Keep(r.watch.ctx, ld.l, ld.sentAt, lease.KeeperConfig{Timing: r.timing, Limits: r.store.Limits(), Log: r.log, OnExtend: onExtend, OnRenew: onRenew})
	return err
}

// mayWaitAgain reports whether a lease the keeper refused with err is let
// go and waited for again: not after a signal, and while --wait allows.
func (r *runState) mayWaitAgain(err error, began time.Time) bool {
	return !r.watch.signalled() && lease.WaitAgain(err) &&
		(r.rc.Wait == lease.WaitForever || time.Since(began) < r.rc.Wait)
}

// abandon lets go of a lease that will not run the child, undoing enforce
// last first: the keeper, the lease, the protection. The release's error
// (the lease was no longer ours) changes nothing here, as nothing ran under
// it; releaseLease logs it.
func (r *runState) abandon(ld *leadership) {
	if ld.keeper != nil {
		ld.keeper.Stop()
	}
	_ = releaseLease(ld, r.timing, r.log)
	if ld.prot != nil {
		ld.prot.finish(true, r.log)
	}
	r.listen.role(listenwire.RoleWaiting)
}

// record is the run's history record.
func (r *runState) record(ld *leadership) *runRecord {
	return newRunRecord(r.store, r.rc.HistoryKeep, ld.info, r.rc.Version, r.timing.CallTimeout, r.log)
}

// childRun is how the child's run ended.
type childRun struct {
	res    runner.Result
	runErr error // the child could not be started
	// cause is why leadership ended under the child: lost, stepped down
	// for its health, the guard gone; nil when it ended by itself.
	cause error
	rec   *runRecord
	// stoppedBySignal: leaderrun was sent INT or TERM while the child ran.
	stoppedBySignal bool
}

// childHooks are the runner's callbacks for the child of ld: what starts
// with it (runCtx bounds the health checks), what ends with it, and the
// last look before its start (leading: whether leadership still holds).
func (r *runState) childHooks(ld *leadership, runCtx, leading context.Context, health *healthGate, rec *runRecord) (started func(int, time.Time), exited func(), mayStart func() error) {
	started = func(_ int, at time.Time) {
		if r.winch { // while the child starts up (catchSignals)
			signal.Notify(r.sigs, syscall.SIGWINCH)
		}
		r.mon.started(at)
		r.listen.started()
		r.pods.start()
		if r.notify != nil { // the status reads the time zone: only under systemd
			r.notify.send("READY=1", "STATUS="+leadingStatus(r.rc.Name, ld.info, time.Now()))
		}
		health.start(runCtx)
		// The history's start record only once the child runs: it is
		// no fencing state, and must not delay the child's start.
		rec.start()
	}
	exited = func() {
		rec.exited()
		health.end() // before the sweep: a running check is no leftover
	}
	mayStart = func() error { // the stop point may pass on the way (a CPU limit)
		if ld.keeper.PastStopPoint() {
			return lease.NewError("the lease's stop point passed before the child could start", lease.ErrLost)
		}
		return context.Cause(leading) // ended while --listen's gate holds it back
	}
	return started, exited, mayStart
}

// supervise runs the child under the keeper, with its health checks and
// the forwarded signals, and records the run's start once the child has
// started.
func (r *runState) supervise(ld *leadership) childRun {
	rc, log := r.rc, r.log
	childEnv := r.childEnv(ld)
	runCtx, unwatch := ld.prot.watch(ld.keeper.Context())
	runCtx, stepDown := context.WithCancelCause(runCtx)
	defer stepDown(nil)
	leading := runCtx
	// --listen: /leader answers 503 before the runner stops the child.
	runCtx, ungate := r.listen.gate(runCtx, func() time.Duration { return r.stopAt(ld) })
	rec := r.record(ld)
	tap := tapSignals(r.sigs, func() { r.pods.stop(); r.listen.stopping(r.stopAt(ld)) })
	// --pod-label: off as soon as leading ends, in the background.
	unwatchPods := context.AfterFunc(leading, r.pods.stop)
	var health *healthGate
	if rc.Health.Cmd != "" {
		health = &healthGate{cfg: rc.Health, env: childEnv, log: log, notify: r.notify, stop: stepDown, cg: ld.prot.cg, guard: ld.prot.guard}
	}
	started, exited, mayStart := r.childHooks(ld, runCtx, leading, health, rec)
	stdout, stderr, captured := r.mon.captureOutput(r.rc.Stdout, r.rc.Stderr) // --ping-output-tail
	res, runErr := runner.Run(runCtx, runner.Config{
		Args:              r.args,
		Env:               childEnv,
		StopSignal:        rc.StopSignal,
		Grace:             r.timing.Grace,
		Signals:           tap.out,
		KeepSignalsCaught: true, // leaderrun exits after the run
		KillNow:           ld.keeper.KillC(),
		Stdin:             r.rc.Stdin,
		Stdout:            stdout,
		Stderr:            stderr,
		Log:               log,
		Cgroup:            ld.prot.cg,
		Guard:             ld.prot.guard,
		Started:           started,
		Exited:            exited,
		MayStart:          mayStart,
	})
	captured() // the copy ends with the output of the child's tree
	ungate()   // before unwatch: the child has ended, nothing to hold back
	health.end()
	tap.close()
	unwatchPods()
	r.pods.stop()
	r.pods.wait() // the label is off (or given up on) before the release
	r.listen.role(listenwire.RoleStopping)
	cause := context.Cause(leading)
	unwatch()
	// Leadership must have been held for the child's whole run: a stop point
	// that passed unnoticed (leaderrun itself frozen past it) counts as lost
	// even if the child then ended by itself.
	if cause == nil && ld.keeper.PastStopPoint() {
		cause = lease.NewError("the lease's validity ran out while leaderrun was not running (frozen or suspended?)", lease.ErrLost)
	}
	ld.keeper.Stop()
	return childRun{res: res, runErr: runErr, cause: cause, rec: rec, stoppedBySignal: tap.stopped.Load()}
}

// childEnv is the child's environment: leaderrun's, with the lease's
// variables and --slots' added, and the systemd notification socket taken
// out unless --pass-env keeps it.
func (r *runState) childEnv(ld *leadership) []string {
	rc := r.rc
	env := childEnviron(r.rc.Environ, r.reads, rc.PassEnv, rc.Name, rc.Holder, ld.info.Token)
	env = slotEnviron(env, rc.PassEnv, ld.info)                                          // --slots
	env = periodEnviron(env, ld.periodStart, ld.periodEnd, rc.OncePer.Period.Location()) // --once-per
	if !rc.PassEnv[notifyVar] {
		env = withoutNotifySocket(r.notify, env)
	}
	return env
}

// finish releases the lease once the child's whole tree is gone (with the
// rest of --hold-at-least), writes the run's end to the history and
// returns the outcome.
func (r *runState) finish(ld *leadership, ch childRun) *Outcome {
	rc, log, res, cause := r.rc, r.log, ch.res, ch.cause
	// docs/design.md, safety rule 8: release only once the whole tree is confirmed gone.
	treeGone := res.PID == 0 || res.GroupGone
	r.endBeforeRelease(ld, ch, cause, treeGone) // --once-per: the next holder reads it
	if !treeGone {
		log.Warn("processes of the child's tree may still run; not releasing the lease, it will expire by itself")
	} else if err := r.release(ld, ch, cause); err != nil && cause == nil && res.PID != 0 {
		// Not ours at release, and the keeper never noticed: the store lost
		// or gave away the lease between two renewals (a deleted key, a
		// restart without persistence). Leadership was not held for the
		// whole run, whatever the child's code says.
		cause = lease.NewError(fmt.Sprintf("the lease was no longer ours when the child had finished (%v)", err), lease.ErrLost, err)
	}
	ld.prot.dismiss(treeGone, log)
	// The run's end goes to the history with the release (release) or
	// after it: it never delays the next holder, and a failed write
	// changes no exit code. The guard, dismissed, exits meanwhile; finish
	// reaps it.
	o, ro := r.outcome(res, ch, cause, treeGone)
	r.listen.ended(ro, o.Code)
	r.mon.ended(runReportOf(rc, ld, o, ro))
	ch.rec.end(ro, o.Code, res.Signal)
	r.mon.wait()
	ld.prot.finish(treeGone, log)
	return o
}

// release gives ld's lease up, with the rest of --hold-at-least, once the
// child's tree is gone. A lease that can carry the run's end record
// (lease.EndingRelease, found through a slot's wrapper by lease.As) takes
// it along when nothing is held, with the outcome of a release that
// succeeds: the end then costs no store round trip of its own. finish writes the end again only if the outcome changed
// (the lease was no longer ours, or the release failed).
func (r *runState) release(ld *leadership, ch childRun, cause error) error {
	hold := holdLeft(r.rc.Hold, ld.sentAt, cause)
	el, ok := lease.As[lease.EndingRelease](ld.l)
	if !ok || hold > 0 {
		return releaseHeld(ld, hold, r.timing, r.log)
	}
	o, ro := r.outcome(ch.res, ch, cause, true)
	end, ok := ch.rec.endForRelease(ro, o.Code, ch.res.Signal)
	if !ok {
		return releaseLease(ld, r.timing, r.log)
	}
	ctx, cancel := releaseContext(ld, r.timing)
	defer cancel()
	err := el.ReleaseEnding(ctx, end)
	if err == nil {
		ch.rec.endedWith(end)
	}
	return releaseAnswer(err, r.log)
}

// outcome says how the run ended, for the exit code and the final line
// (o) and for the history (ro).
func (r *runState) outcome(res runner.Result, ch childRun, cause error, treeGone bool) (o *Outcome, ro lease.Outcome) {
	rc, name := r.rc, r.args[0]
	if ch.runErr != nil {
		return Classify(ch.runErr), lease.OutcomeNotStarted
	}
	var hc healthCause
	if errors.As(cause, &hc) {
		released := "released"
		if !treeGone {
			released = "left to expire"
		}
		how := stopText(name, rc.StopSignal, res)
		if !res.Stopped { // it ended by itself just as the check gave up
			how = fmt.Sprintf("%s exited with code %d", name, res.Code)
		}
		return newOutcome(ExitUnhealthy, slog.LevelError,
			fmt.Sprintf("%v; %s; lease %s %s", hc.err, how, rc.Name, released),
			"event", "unhealthy", "lease", rc.Name), lease.OutcomeSteppedDown
	}
	if errors.Is(cause, lease.ErrLost) || errors.Is(cause, runner.ErrGuardDied) {
		how := ""
		switch {
		case res.Stopped:
			how = stopText(name, rc.StopSignal, res)
		case res.Signal != 0:
			how = fmt.Sprintf("%s was killed by %s", name, unix.SignalName(res.Signal))
		default:
			how = fmt.Sprintf("%s exited with code %d", name, res.Code)
		}
		what := "leadership of lease " + rc.Name + " lost"
		if errors.Is(cause, runner.ErrGuardDied) {
			what = "lease " + rc.Name + " given up"
		} else if !res.Stopped {
			what = "leadership of lease " + rc.Name + " was not held for the child's whole run"
		}
		return newOutcome(ExitLost, slog.LevelError,
			fmt.Sprintf("%s%s; %s", what, lostWhy(cause), how),
			"event", "lost", "lease", rc.Name), lease.OutcomeLost
	}
	return childOutcome(name, res), childRunOutcome(resultView{code: res.Code, signal: res.Signal}, ch.stoppedBySignal)
}
