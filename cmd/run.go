package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
	prioStep     time.Duration // --priority-step; 0: the store's δ
	storeURL     string
	contain      string
	passEnv      map[string]bool
	health       healthConfig
	hold         time.Duration // --hold-at-least; 0 means none
	historyKeep  int           // --history-keep; 0 records nothing
	oncePer      oncePerConfig // --once-per and its companions
	waitGiven    bool          // --wait or --no-wait was given (flag or variable)
	monitor      monitorConfig // --ping, --metrics-file
	slots        int           // --slots (slots.go)
}

// parseRun validates every flag before anything starts: bad input never
// starts a child.
func parseRun(c *cli.Context, args []string) (runConfig, error) {
	rc := runConfig{args: args, storeURL: c.String("store"), conflictCode: c.Int("conflict-exit-code")}
	if args[0] == "" {
		return rc, newOutcome(ExitNotFound, slog.LevelError, "the command name after -- is empty: nothing to run", "event", "not_found")
	}
	var err error
	if rc.name, err = leaseName(c, args[0]); err != nil {
		return rc, err
	}
	if rc.holder, err = holderLabel(c.String("holder")); err != nil {
		return rc, err
	}
	if err := rc.parseBehaviour(c); err != nil {
		return rc, err
	}
	if rc.slots, err = parseSlots(c, rc); err != nil {
		return rc, err
	}
	t := lease.Timing{TTL: c.Duration("ttl"), RenewEvery: c.Duration("renew-every"), Grace: c.Duration("grace"), CallTimeout: c.Duration("call-timeout")}
	t.Explicit.RenewEvery = c.IsSet("renew-every")
	t.Explicit.Grace = c.IsSet("grace")
	t.Explicit.CallTimeout = c.IsSet("call-timeout")
	if t.TTL <= 0 {
		return rc, usagef("--ttl %s: want a positive duration such as 15s", lease.FormatDuration(t.TTL))
	}
	rc.timing = t
	if rc.health, err = parseHealth(c, t.TTL); err != nil {
		return rc, err
	}
	if rc.monitor, err = parseMonitor(c); err != nil {
		return rc, err
	}
	return rc, nil
}

// leaseName is --name, or else the command's base name, checked.
func leaseName(c *cli.Context, command string) (string, error) {
	name := c.String("name")
	if name == "" {
		if isLauncher(command) {
			return "", usagef("%s is a shell, interpreter or wrapper: as the default lease name it would make every job it runs share one lease; give --name", filepath.Base(command))
		}
		name = filepath.Base(command)
	}
	if err := lease.ValidateName(name); err != nil {
		if !c.IsSet("name") {
			return "", usagef("cannot use the command's name %q as the lease name; give --name", filepath.Base(command))
		}
		return "", usageError{err}
	}
	return name, nil
}

// holderLabel is --holder, or else hostname:pid, checked.
func holderLabel(holder string) (string, error) {
	if holder == "" {
		host, _ := os.Hostname()
		holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if len(holder) > 200 || strings.ContainsAny(holder, "\n\r") {
		return "", usagef("--holder must be one line of at most 200 bytes")
	}
	if err := checkPrintable(holder); err != nil {
		return "", usagef("--holder %q: %v", holder, err)
	}
	return holder, nil
}

// parseBehaviour reads the flags that say how to wait, stop, contain and
// record: --wait/--no-wait, --contain, --stop-signal, --conflict-exit-code,
// --priority, --pass-env, --hold-at-least and --history-keep.
func (rc *runConfig) parseBehaviour(c *cli.Context) error {
	var err error
	if rc.wait, err = parseWait(c.String("wait")); err != nil {
		return err
	}
	if c.Bool("no-wait") {
		rc.wait = 0
	}
	rc.waitGiven = c.IsSet("wait") || c.IsSet("no-wait")
	if rc.contain, err = parseContain(c.String("contain")); err != nil {
		return err
	}
	if rc.stopSignal, err = parseSignal(c.String("stop-signal")); err != nil {
		return err
	}
	if rc.conflictCode < 0 || rc.conflictCode > 255 {
		return usagef("--conflict-exit-code %d: want 0-255", rc.conflictCode)
	}
	if rc.priority = c.Int("priority"); rc.priority < -MaxPriority || rc.priority > MaxPriority {
		return usagef("--priority %d: want a whole number from -%d to %d", rc.priority, MaxPriority, MaxPriority)
	}
	if rc.prioStep = c.Duration("priority-step"); rc.prioStep < 0 || rc.prioStep > MaxPriorityStep || (c.IsSet("priority-step") && rc.prioStep < time.Millisecond) {
		return usagef("--priority-step %s: want a duration from 1ms to %s", lease.FormatDuration(rc.prioStep), lease.FormatDuration(MaxPriorityStep))
	}
	if rc.passEnv, err = parsePassEnv(c.StringSlice("pass-env")); err != nil {
		return err
	}
	if rc.hold = c.Duration("hold-at-least"); rc.hold < 0 || rc.hold > MaxHold {
		return usagef("--hold-at-least %s: want a duration from 0 to %s (31 days: a monthly schedule's slot)", lease.FormatDuration(rc.hold), lease.FormatDuration(MaxHold))
	}
	if rc.historyKeep = c.Int("history-keep"); rc.historyKeep < 0 || rc.historyKeep > lease.MaxHistoryKeep {
		return usagef("--history-keep %d: want 0 (record nothing) to %d runs", rc.historyKeep, lease.MaxHistoryKeep)
	}
	rc.oncePer, err = parseOncePer(c, rc.historyKeep)
	return err
}

// MaxHold bounds --hold-at-least: a hold keeps a schedule slot taken, and
// the longest slot worth keeping is a monthly job's. A longer one (999999h)
// is a typo that would block the lease for a century.
const MaxHold = 31 * 24 * time.Hour

// checkPriority refuses a --priority or --priority-step the store would
// silently ignore: one without a standby list (lease.CandidateRegistry)
// cannot order takeovers.
func checkPriority(store lease.Store, priority int, step time.Duration) error {
	_, ok := store.(lease.CandidateRegistry)
	switch {
	case ok:
	case priority != 0:
		return usagef("--priority %d: this store keeps no list of standbys, so a priority would have no effect; leave --priority out (every standby then has the same chance)", priority)
	case step != 0:
		return usagef("--priority-step %s: this store keeps no list of standbys, so there is no takeover order to hold back for; leave --priority-step out", lease.FormatDuration(step))
	}
	return nil
}

// MaxPriorityStep bounds --priority-step: a dead standby at the front of
// the line holds a takeover back by up to three steps.
const MaxPriorityStep = time.Minute

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

// runCommand runs COMMAND under the lease, in four phases a reader can
// hold one at a time: prepare (flags, store, timing: nothing taken yet),
// lead (acquire, protect, keep: the lease is ours and enforced), supervise
// the child, and finish (release once the tree is gone, history, the
// outcome and its final line).
func runCommand(ctx context.Context, c *cli.Context, args []string, e env, log *slog.Logger) *outcome {
	r, o := prepareRun(ctx, c, args, e, log)
	if o != nil {
		return o
	}
	defer r.close()
	if o := r.oncePerUsable(); o != nil {
		return o
	}
	ld, o := r.lead(ctx)
	if o == nil {
		o = r.oncePerDone(ld) // --once-per: decided under the lease; nil runs COMMAND
	}
	if o != nil {
		return o
	}
	return r.finish(ld, r.supervise(ld))
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
		return newOutcome(128+int(sc.sig), slog.LevelWarn,
			fmt.Sprintf("%v while waiting for lease %s; %s not started", sc, rc.name, rc.args[0]), "event", "interrupted")
	case errors.As(err, &he):
		return newOutcome(rc.conflictCode, slog.LevelInfo, conflictText(rc, he.By), "event", "conflict")
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
	return releaseAnswer(l.Release(ctx), log)
}

// releaseAnswer logs the store's answer err to a release and returns it
// when it says the lease was no longer ours (see releaseLease).
func releaseAnswer(err error, log *slog.Logger) error {
	if err != nil {
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
		return newOutcome(res.Code, slog.LevelWarn,
			fmt.Sprintf("%s was killed by %s", name, unix.SignalName(res.Signal)), "event", "child_signaled")
	}
	level := slog.LevelInfo
	if res.Code != 0 {
		level = slog.LevelWarn
	}
	return newOutcome(res.Code, level, fmt.Sprintf("%s exited with code %d", name, res.Code), "event", "child_exited")
}
