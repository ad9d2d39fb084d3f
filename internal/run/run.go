// Package run is one run of COMMAND under a lease, from a validated Config
// (cmd fills it from the flags; this package knows no command line). Run
// goes through four phases a reader can hold one at a time:
//
//   - prepare (phases.go): the command resolved, the store opened, the
//     timing resolved against the store's limits, the guard started ahead,
//     the signals caught; nothing is taken yet.
//   - lead: the lease acquired (lease.Acquire), then enforced outside
//     leaderrun by the guard and the child's cgroup (guard.go) and kept by
//     a lease.Keeper; --once-per decides under it (onceper.go).
//   - supervise: the child run by the runner with its health checks
//     (health.go), its environment (childenv.go, slots.go), its output
//     through leaderrun-ping with --ping-output-tail (outputtail.go) and
//     the forwarded signals (signals.go); systemd is told (notify.go).
//   - finish: the lease released only once the child's whole tree is gone
//     (with the rest of --hold-at-least, hold.go), the run's end written to
//     the store's history (record.go), the monitoring told (monitor.go,
//     ping.go, metrics.go), and the outcome returned (outcome.go): the exit
//     code and the final line, worded in messages.go and waiting.go.
//
// The safety argument (deadlines, the kill point, release after the tree)
// is lease's (lease/doc.go) and the runner's; this package puts them in
// order.
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// MaxHold bounds --hold-at-least: a hold keeps a schedule slot taken, and
// the longest slot worth keeping is a monthly job's. A longer one (999999h)
// is a typo that would block the lease for a century.
const MaxHold = 31 * 24 * time.Hour

// MaxPriorityStep bounds --priority-step: a dead standby at the front of
// the line holds a takeover back by up to three steps.
const MaxPriorityStep = time.Minute

// MaxPriority bounds --priority either way.
const MaxPriority = 1_000_000

// Run runs rc.Args under the lease rc describes and returns how it ended:
// the child's own exit code, or leaderrun's (outcome.go), with the final
// line. It blocks until the run is over and everything it started is gone
// or left to the guard; rc must be valid (Config).
func Run(ctx context.Context, rc Config) *Outcome {
	r, o := prepare(ctx, rc)
	if o != nil {
		return o
	}
	defer r.close()
	ld, o := r.lead(ctx)
	if o == nil {
		o = r.oncePerDone(ctx, ld) // --once-per: decided under the lease; nil runs COMMAND
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
func refuseOwnAncestor(getenv func(string) string, rc Config, cancel context.CancelCauseFunc, report func(lease.WaitEvent)) func(lease.WaitEvent) {
	outer := getenv(EnvLease)
	token, err := strconv.ParseUint(getenv(EnvLeaseToken), 10, 64)
	if rc.WaitGiven || outer != rc.Name || err != nil {
		return report
	}
	return func(ev lease.WaitEvent) {
		if ev.By.Token == token && (ev.Kind == lease.WaitStarted || ev.Kind == lease.WaitHolderChanged) {
			cancel(nestedError{name: rc.Name, token: token})
			return
		}
		report(ev)
	}
}

// acquireOutcome maps why no child was started.
func acquireOutcome(err error, rc Config) *Outcome {
	var sc signalCause
	var he *lease.HeldError
	var ne nestedError
	switch {
	case errors.As(err, &ne):
		return Classify(lease.NewError(ne.Error(), ErrUsage, ne))
	case errors.As(err, &sc):
		return newOutcome(128+int(sc.sig), slog.LevelWarn,
			fmt.Sprintf("%v while waiting for lease %s; %s not started", sc, rc.Name, rc.Args[0]), "event", "interrupted")
	case errors.As(err, &he):
		return newOutcome(rc.ConflictCode, slog.LevelInfo, conflictText(rc, he.By), "event", "conflict")
	default:
		return Classify(err)
	}
}

// releaseLease gives ld's lease up on a context of its own (releaseContext):
// cleanup must run even when the run's context is done.
//
// It returns the store's answer when that says the lease was no longer ours
// (ErrNotHeld or ErrLost): then leadership ended at some point the keeper
// did not see, before or after the child's end.
func releaseLease(ld *leadership, t lease.Timing, log *slog.Logger) error {
	ctx, cancel := releaseContext(ld, t)
	defer cancel()
	return releaseAnswer(ld.l.Release(ctx), log)
}

// releaseContext sets up the connection of ld's lease first (a
// lease.Connector, found through a slot's wrapper), as the keeper does
// before each renewal, and returns the context of the release call itself,
// bounded by the call timeout. A connection that was dropped while the child
// ran (an idle timeout, a server restart) then costs a login outside the
// call's time, and a loaded server's slow login is a wait, not a failed
// release that leaves the standbys to wait out the TTL. The set-up is bounded
// by what is left of the lease: past that, a release frees nothing.
func releaseContext(ld *leadership, t lease.Timing) (context.Context, context.CancelFunc) {
	if c, ok := lease.As[lease.Connector](ld.l); ok {
		if left := ld.left(t.TTL); left > 0 {
			cctx, cancel := context.WithTimeout(context.Background(), left)
			_ = c.Connect(cctx) // a failed set-up is the release's to report
			cancel()
		}
	}
	return context.WithTimeout(context.Background(), t.CallTimeout)
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
func childOutcome(name string, res runner.Result) *Outcome {
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
