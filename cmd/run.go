package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// runConfig is the validated form of the run flags.
type runConfig struct {
	args         []string
	name         string
	holder       string
	wait         time.Duration
	timing       lease.Timing
	stopSignal   syscall.Signal
	conflictCode int
	priority     int
	storeURL     string
	contain      string
	passEnv      map[string]bool
	health       healthConfig
	hold         time.Duration // --hold-at-least; 0 means none
	historyKeep  int           // --history-keep; 0 records nothing
	waitGiven    bool          // --wait or --no-wait was given (flag or variable)
}

// parseRun validates every flag before anything starts (STYLE habit 7).
func parseRun(c *cli.Context, args []string, getenv func(string) string) (runConfig, error) {
	rc := runConfig{args: args, storeURL: c.String("store"), conflictCode: c.Int("conflict-exit-code")}
	if args[0] == "" {
		return rc, done(ExitNotFound, slog.LevelError, "the command name after -- is empty: nothing to run", "event", "not_found")
	}
	rc.name = c.String("name")
	if rc.name == "" {
		if isLauncher(args[0]) {
			return rc, usagef("%s is a shell, interpreter or wrapper: as the default lease name it would make every job it runs share one lease; give --name", filepath.Base(args[0]))
		}
		rc.name = filepath.Base(args[0])
	}
	if err := lease.ValidateName(rc.name); err != nil {
		if !c.IsSet("name") {
			return rc, usagef("cannot use the command's name %q as the lease name; give --name", filepath.Base(args[0]))
		}
		return rc, usageError{err}
	}
	var err error
	if rc.wait, err = parseWait(c.String("wait")); err != nil {
		return rc, err
	}
	if c.Bool("no-wait") {
		rc.wait = 0
	}
	rc.waitGiven = c.IsSet("wait") || c.IsSet("no-wait")
	if rc.contain, err = parseContain(c.String("contain")); err != nil {
		return rc, err
	}
	if rc.stopSignal, err = parseSignal(c.String("stop-signal")); err != nil {
		return rc, err
	}
	if rc.conflictCode < 0 || rc.conflictCode > 255 {
		return rc, usagef("--conflict-exit-code %d: want 0-255", rc.conflictCode)
	}
	if rc.priority = c.Int("priority"); rc.priority < -MaxPriority || rc.priority > MaxPriority {
		return rc, usagef("--priority %d: want a whole number from -%d to %d", rc.priority, MaxPriority, MaxPriority)
	}
	rc.holder = c.String("holder")
	if rc.holder == "" {
		host, _ := os.Hostname()
		rc.holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if len(rc.holder) > 200 || strings.ContainsAny(rc.holder, "\n\r") {
		return rc, usagef("--holder must be one line of at most 200 bytes")
	}
	if err := checkPrintable(rc.holder); err != nil {
		return rc, usagef("--holder %q: %v", rc.holder, err)
	}
	if rc.passEnv, err = parsePassEnv(c.StringSlice("pass-env")); err != nil {
		return rc, err
	}
	t := lease.Timing{TTL: c.Duration("ttl"), RenewEvery: c.Duration("renew-every"), Grace: c.Duration("grace"), CallTimeout: c.Duration("call-timeout")}
	t.Explicit.RenewEvery = c.IsSet("renew-every")
	t.Explicit.Grace = c.IsSet("grace")
	t.Explicit.CallTimeout = c.IsSet("call-timeout")
	if t.TTL <= 0 {
		return rc, usagef("--ttl %v: want a positive duration such as 15s", t.TTL)
	}
	rc.timing = t
	if rc.health, err = parseHealth(c, t.TTL); err != nil {
		return rc, err
	}
	if rc.hold = c.Duration("hold-at-least"); rc.hold < 0 || rc.hold > MaxHold {
		return rc, usagef("--hold-at-least %v: want a duration from 0 to %s (31 days: a monthly schedule's slot)", rc.hold, humanDuration(MaxHold))
	}
	if rc.historyKeep = c.Int("history-keep"); rc.historyKeep < 0 || rc.historyKeep > lease.MaxHistoryKeep {
		return rc, usagef("--history-keep %d: want 0 (record nothing) to %d runs", rc.historyKeep, lease.MaxHistoryKeep)
	}
	return rc, nil
}

// MaxHold bounds --hold-at-least: a hold keeps a schedule slot taken, and
// the longest slot worth keeping is a monthly job's. A longer one (999999h)
// is a typo that would block the lease for a century.
const MaxHold = 31 * 24 * time.Hour

// checkPriority refuses a --priority the store would silently ignore: one
// without a standby list (lease.CandidateRegistry) cannot order takeovers.
func checkPriority(store lease.Store, priority int) error {
	if _, ok := store.(lease.CandidateRegistry); priority != 0 && !ok {
		return usagef("--priority %d: this store keeps no list of standbys, so a priority would have no effect; leave --priority out (every standby then has the same chance)", priority)
	}
	return nil
}

// MaxPriority bounds --priority either way.
const MaxPriority = 1_000_000

func parseWait(s string) (time.Duration, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "forever", "inf", "infinity", "-1":
		return lease.WaitForever, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usagef("--wait %q: want a duration such as 30s or 10m, 0 to try once, or forever", s)
	}
	return d, nil
}

func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		sig := syscall.Signal(n)
		if n <= 0 || n > 64 || sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
			return 0, usagef("--stop-signal %s: want a catchable signal such as TERM, INT or HUP", s)
		}
		return sig, nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	if sig == 0 || sig == unix.SIGKILL || sig == unix.SIGSTOP {
		return 0, usagef("--stop-signal %s: want a catchable signal such as TERM, INT or HUP", s)
	}
	return sig, nil
}

// signalCause is the cause of the run context when leaderrun gets a signal
// while it waits for the lease.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return "got " + unix.SignalName(s.sig) }

// runCommand acquires the lease, runs the child under a keeper and returns
// how it ended.
func runCommand(ctx context.Context, c *cli.Context, args []string, e env, log *slog.Logger) *outcome {
	rc, err := parseRun(c, args, e.getenv)
	if err != nil {
		return classify(err)
	}
	// Before anything starts: a store served by another program gets the
	// whole run (this process is replaced).
	if err := dispatch(rc.storeURL); err != nil {
		return classify(err)
	}
	keepStderrFromKilling()
	// A command that cannot run is refused before any lease is taken.
	if _, err := runner.Resolve(args[0]); err != nil {
		return classify(err)
	}
	if err := checkContain(rc.contain); err != nil {
		return classify(err)
	}
	// Catch the forwarded signals for the whole run: while waiting, INT, TERM
	// and HUP end the wait; once the child runs, the runner forwards them.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, runner.ForwardedSignals...)
	defer signal.Stop(sigs)

	pre := startGuardAsync()
	defer func() { pre.drop() }() // the current one: a retry below starts another

	reads := newEnvReads(e.getenv) // what the store consumed stays out of the child's environment
	store, err := openStoreFor(ctx, rc.storeURL, StoreOptions{CallTimeout: provisionalCallTimeout(rc.timing), Getenv: reads.get, Log: log})
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	if err := checkHold(store, rc.hold); err != nil {
		return classify(err)
	}
	if err := checkPriority(store, rc.priority); err != nil {
		return classify(err)
	}
	notify := newNotifier(reads.get, log)
	defer notify.close()
	// Timing is validated as for an expiring store even when this one does
	// not expire (file): a command line that works here must not be refused
	// when the same job moves to Redis or Azure.
	vlim := store.Limits()
	if !vlim.Expires {
		vlim = lease.Limits{Expires: true, Epsilon: 5 * time.Millisecond}
	}
	timing, err := rc.timing.Resolve(vlim)
	if err != nil {
		return classify(err)
	}
	log.Debug("timing", "ttl", timing.TTL, "renew_every", timing.RenewEvery, "grace", timing.Grace, "call_timeout", timing.CallTimeout)
	reportShrunkGrace(log, rc.timing, timing)

	// Until the child starts, INT, TERM, HUP and QUIT mean "don't start it".
	watch := watchSignals(ctx, sigs)
	defer watch.cancel(nil)
	var (
		l      lease.Lease
		info   lease.Holder
		prot   *protection
		keeper *lease.Keeper
		logger = log
		sentAt time.Duration // when the granted acquisition request was sent
	)
	began := time.Now()
	for {
		wait := rc.wait
		if wait != lease.WaitForever {
			wait = max(rc.wait-time.Since(began), 0)
		}
		acq, err := lease.Acquire(watch.ctx, store, lease.Request{Name: rc.name, Holder: rc.holder, TTL: timing.TTL},
			lease.AcquireOptions{Wait: wait, CallTimeout: timing.CallTimeout, Log: log,
				OnWait:      refuseOwnAncestor(e.getenv, rc, watch.cancel, notifyWaiting(notify, rc.name, waitReporter(log, rc.name, wait))),
				RemindEvery: remindEvery, Priority: rc.priority})
		if err != nil {
			watch.stop()
			return acquireOutcome(err, rc)
		}
		l, sentAt = acq.Lease, acq.SentAt
		info = l.Info()
		logger.Info(acquiredText(rc.name, acq.Waited), "token", info.Token, "holder", rc.holder)

		// The guard (and the child's cgroup) come before the child: from here on
		// the child's tree is enforced even if leaderrun dies or freezes.
		prot, err = protect(l, pre, rc.contain, rc.stopSignal, timing, logger)
		if err != nil {
			watch.stop()
			releaseLease(l, timing, logger)
			return notStarted(newRunRecord(store, rc.historyKeep, info, timing.CallTimeout, logger), classify(err))
		}
		keeper, err = lease.Keep(watch.ctx, l, acq.SentAt, lease.KeeperConfig{Timing: timing, Limits: store.Limits(), Log: logger, OnExtend: prot.guard.Until})
		if err != nil && !watch.signalled() && keepRetriable(err) && (rc.wait == lease.WaitForever || time.Since(began) < rc.wait) {
			// Granted too late, or its first renewal went unanswered (the
			// store froze just after granting it): a standby does not give
			// up on a transient fault; it lets go and waits again.
			logger.Warn(fmt.Sprintf("lease %s could not be kept long enough to start %s; releasing it and waiting again", rc.name, args[0]), "err", err)
			releaseLease(l, timing, logger)
			prot.finish(true, logger)
			pre = startGuardAsync()
			continue
		}
		watch.stop()
		if err == nil && watch.signalled() {
			keeper.Stop()
		}
		if err != nil || watch.signalled() {
			releaseLease(l, timing, logger)
			prot.finish(true, logger)
			rec := newRunRecord(store, rc.historyKeep, info, timing.CallTimeout, logger)
			if watch.signalled() {
				return notStarted(rec, acquireOutcome(context.Cause(watch.ctx), rc))
			}
			return notStarted(rec, classify(err))
		}
		break
	}
	if e, ok := keeper.ValidUntil(); ok {
		prot.guard.Until(e)
	}
	childEnv := childEnviron(os.Environ(), reads, rc.passEnv, rc.name, rc.holder, info.Token)
	if !rc.passEnv[notifyVar] {
		childEnv = withoutNotifySocket(notify, childEnv)
	}
	runCtx, unwatch := prot.watch(keeper.Context())
	runCtx, stepDown := context.WithCancelCause(runCtx)
	defer stepDown(nil)
	rec := newRunRecord(store, rc.historyKeep, info, timing.CallTimeout, logger)
	rec.start()
	tap := tapSignals(sigs)
	var health *healthGate
	if rc.health.cmd != "" {
		health = &healthGate{cfg: rc.health, env: childEnv, log: logger, notify: notify, stop: stepDown, cg: prot.cg}
	}
	res, runErr := runner.Run(runCtx, runner.Config{
		Args:       args,
		Env:        childEnv,
		StopSignal: rc.stopSignal,
		Grace:      timing.Grace,
		Signals:    tap.out,
		KillNow:    keeper.KillC(),
		Stdin:      e.stdio.In,
		Stdout:     e.stdio.Out,
		Stderr:     e.stdio.Err,
		Log:        logger,
		Cgroup:     prot.cg,
		Guard:      prot.guard,
		Started: func(int) {
			if notify != nil { // the status reads the time zone: only under systemd
				notify.send("READY=1", "STATUS="+leadingStatus(rc.name, info, time.Now()))
			}
			health.start(runCtx)
		},
		Exited: health.end, // before the sweep: a running check is no leftover
	})
	health.end()
	tap.close()
	cause := context.Cause(runCtx)
	unwatch()
	// Leadership must have been held for the child's whole run: a stop point
	// that passed unnoticed (leaderrun itself frozen past it) counts as lost
	// even if the child then ended by itself.
	if cause == nil && keeper.PastStopPoint() {
		cause = fmt.Errorf("%w: the lease's validity ran out while leaderrun was not running (frozen or suspended?)", lease.ErrLost)
	}
	keeper.Stop()

	// docs/design.md, safety rule 8: release only once the whole tree is confirmed gone.
	treeGone := res.PID == 0 || res.GroupGone
	if !treeGone {
		logger.Warn("processes of the child's tree may still run; not releasing the lease, it will expire by itself")
	} else if err := releaseHeld(store, l, holdLeft(rc.hold, sentAt, cause), timing, logger); err != nil && cause == nil && res.PID != 0 {
		// Not ours at release, and the keeper never noticed: the store lost
		// or gave away the lease between two renewals (a deleted key, a
		// restart without persistence). Leadership was not held for the
		// whole run, whatever the child's code says.
		cause = fmt.Errorf("%w: the lease was no longer ours when the child had finished (%v)", lease.ErrLost, err)
	}
	prot.finish(treeGone, logger)
	// The run's end goes to the history after the release: it never
	// delays the next holder, and a failed write changes no exit code.
	ended := func(o *outcome, ro lease.Outcome) *outcome {
		rec.end(ro, o.code, res.Signal)
		return o
	}
	if runErr != nil {
		return ended(classify(runErr), lease.OutcomeNotStarted)
	}
	var hc healthCause
	if errors.As(cause, &hc) {
		released := "released"
		if !treeGone {
			released = "left to expire"
		}
		how := stopText(args[0], rc.stopSignal, res)
		if !res.Stopped { // it ended by itself just as the check gave up
			how = fmt.Sprintf("%s exited with code %d", args[0], res.Code)
		}
		return ended(done(ExitUnhealthy, slog.LevelError,
			fmt.Sprintf("%v; %s; lease %s %s; exit %d", hc.err, how, rc.name, released, ExitUnhealthy),
			"event", "unhealthy", "lease", rc.name), lease.OutcomeSteppedDown)
	}
	if lost := errors.Is(cause, lease.ErrLost) || errors.Is(cause, runner.ErrGuardDied); lost {
		how := ""
		switch {
		case res.Stopped:
			how = stopText(args[0], rc.stopSignal, res)
		case res.Signal != 0:
			how = fmt.Sprintf("%s was killed by %s", args[0], unix.SignalName(res.Signal))
		default:
			how = fmt.Sprintf("%s exited with code %d", args[0], res.Code)
		}
		what := "leadership of lease " + rc.name + " lost"
		if errors.Is(cause, runner.ErrGuardDied) {
			what = "lease " + rc.name + " given up"
		} else if !res.Stopped {
			what = "leadership of lease " + rc.name + " was not held for the child's whole run"
		}
		return ended(done(ExitLost, slog.LevelError,
			fmt.Sprintf("%s%s; %s; exit %d", what, lostWhy(cause), how, ExitLost),
			"event", "lost", "lease", rc.name), lease.OutcomeLost)
	}
	return ended(childOutcome(args[0], res), childRunOutcome(resultView{code: res.Code, signal: res.Signal}, tap.stopped.Load()))
}

// keepRetriable reports whether Keep failed for a reason a new acquisition
// may not meet: too little runway, or a renewal whose answer did not come.
func keepRetriable(err error) bool {
	return errors.Is(err, lease.ErrNoRunway) || errors.Is(err, lease.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded)
}

// provisionalCallTimeout is the call timeout Timing.Resolve will settle on,
// needed to open the store before its limits are known.
func provisionalCallTimeout(t lease.Timing) time.Duration {
	if t.Explicit.CallTimeout {
		return t.CallTimeout
	}
	r := t.TTL / 3
	if t.Explicit.RenewEvery {
		r = t.RenewEvery
	}
	return max(r/2, time.Millisecond)
}

// signalWatch turns INT, TERM, HUP and QUIT into the cancellation of ctx while
// leaderrun waits for the lease and prepares the child; other signals are
// dropped, as there is no child yet to forward them to.
type signalWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	quit   chan struct{}
	done   chan struct{}
}

func watchSignals(parent context.Context, sigs <-chan os.Signal) *signalWatch {
	w := &signalWatch{quit: make(chan struct{}), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.quit:
				return
			case s := <-sigs:
				// QUIT too: Ctrl-\ must not be ignored while nothing runs yet.
				if sig := s.(syscall.Signal); sig == syscall.SIGINT || sig == syscall.SIGTERM || sig == syscall.SIGHUP || sig == syscall.SIGQUIT {
					w.cancel(signalCause{sig})
					return
				}
			}
		}
	}()
	return w
}

// stop ends the watching goroutine without cancelling ctx; signals that
// arrive afterwards stay in the channel for the runner to forward.
func (w *signalWatch) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

// signalled reports whether a signal cancelled ctx.
func (w *signalWatch) signalled() bool {
	var sc signalCause
	return errors.As(context.Cause(w.ctx), &sc)
}

// nestedError says the lease is held by the run this one was started
// inside: waiting for it would wait for the run's own ancestor.
type nestedError struct {
	name  string
	token uint64
}

func (e nestedError) Error() string {
	return fmt.Sprintf("already running inside lease %s (token %d, held by the leaderrun that started this one): waiting would wait for itself; use another --name, or give --wait to wait anyway", e.name, e.token)
}

// refuseOwnAncestor wraps an OnWait reporter: when the lease this run waits
// for is held with the token a parent leaderrun handed down
// (LEADERRUN_LEASE, LEADERRUN_LEASE_TOKEN), the run would wait for its own
// ancestor, forever under the default --wait: it cancels the wait with a
// nestedError. The token identifies the outer acquisition in this very store,
// so the same name in another store is not refused. An explicit --wait (or
// --no-wait) asks to wait anyway.
func refuseOwnAncestor(getenv func(string) string, rc runConfig, cancel context.CancelCauseFunc, report func(lease.WaitEvent)) func(lease.WaitEvent) {
	outer := getenv(envLease)
	token, err := strconv.ParseUint(getenv(envLeaseToken), 10, 64)
	if rc.waitGiven || outer != rc.name || err != nil {
		return report
	}
	return func(ev lease.WaitEvent) {
		if ev.By.Token == token && (ev.Kind == lease.WaitStarted || ev.Kind == lease.WaitHolderChanged) {
			cancel(nestedError{name: rc.name, token: token})
			return
		}
		report(ev)
	}
}

// acquireOutcome maps why no child was started.
func acquireOutcome(err error, rc runConfig) *outcome {
	var sc signalCause
	var he *lease.HeldError
	var ne nestedError
	switch {
	case errors.As(err, &ne):
		return classify(usageError{ne})
	case errors.As(err, &sc):
		return done(128+int(sc.sig), slog.LevelWarn,
			fmt.Sprintf("%v while waiting for lease %s; %s not started", sc, rc.name, rc.args[0]), "event", "interrupted")
	case errors.As(err, &he):
		return done(rc.conflictCode, slog.LevelInfo, conflictText(rc, he.By), "event", "conflict")
	default:
		return classify(err)
	}
}

// releaseLease gives the lease up on a context of its own: cleanup must run
// even when the run's context is done.
//
// It returns the store's answer when that says the lease was no longer ours
// (ErrNotHeld or ErrLost): then leadership ended at some point the keeper
// did not see, before or after the child's end.
func releaseLease(l lease.Lease, t lease.Timing, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.CallTimeout)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		if errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrLost) {
			log.Debug("lease was no longer ours at release", "err", err)
			return err
		}
		log.Warn("releasing the lease failed; it will expire by itself", "err", err)
		return nil
	}
	log.Debug("lease released")
	return nil
}

// childOutcome passes the child's own ending through.
func childOutcome(name string, res runner.Result) *outcome {
	if res.Signal != 0 {
		return done(res.Code, slog.LevelWarn,
			fmt.Sprintf("%s was killed by %s; exit %d", name, unix.SignalName(res.Signal), res.Code), "event", "child_signaled")
	}
	level := slog.LevelInfo
	if res.Code != 0 {
		level = slog.LevelWarn
	}
	return done(res.Code, level, fmt.Sprintf("%s exited with code %d", name, res.Code), "event", "child_exited")
}
