package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
)

// --once-per PERIOD: whoever takes the lease runs COMMAND only when the
// store's run history holds no successful run (--once-per-any: no ended
// run) that started in the current period (--once-within D: in the last
// D), and, with --once-per-deadline, only within that long of the
// period's start. The decision is made under the
// lease, and a run's end is written before its release, so the next holder
// always reads it: two holders never both find the period not done.

// oncePerClock returns the instant --once-per decides the period of, for
// a lease just acquired as info: the acquisition on the store's clock
// where the store has one (ClockTokens: info.Granted, which the history
// records with the run), else the acquisition on this host's clock, which
// is also the start the history records for the run (info.Since, set here
// if the store left it zero). Deciding on a later "now" would let a run
// acquired just before a period's end be decided for the next period but
// recorded in this one, where the next holder would not count it for the
// period it ran for. runStart is when a recorded run started on that same
// clock.
//
// Not the token: it is the store's clock only while the fencing counter
// is not ahead of it, and a counter up to lease.MaxClockSkew ahead is
// followed (written ahead, or a clock that stepped back). Every
// acquisition in that lead gets a token just above the counter, so periods
// decided from tokens would all be one period, and the job would run once
// where it should run in each.
func (r *runState) oncePerClock(info *lease.Holder) (at time.Time, onStore bool) {
	if _, ok := r.store.(lease.ClockTokens); ok && info.Token != 0 {
		if !info.Granted.IsZero() {
			return info.Granted, true
		}
		return lease.TokenTime(info.Token), true
	}
	if info.Since.IsZero() {
		info.Since = wallclock.Now()
	}
	return info.Since, false
}

func (r *runState) runStart(run lease.Run) time.Time {
	if _, ok := r.store.(lease.ClockTokens); ok {
		if !run.Granted.IsZero() {
			return run.Granted
		}
		return lease.TokenTime(run.Token) // a record from before grants were recorded
	}
	return run.Start
}

// oncePerDone decides, under the lease ld, whether the current period
// still needs a run. It returns nil to run COMMAND, or else the "not
// needed" outcome (or a failure to read the history) after releasing the
// lease: no child is started, no run is recorded.
func (r *runState) oncePerDone(ctx context.Context, ld *leadership) *Outcome {
	op := r.rc.OncePer
	if !op.On {
		return nil
	}
	at, onStore := r.oncePerClock(&ld.info)
	start, end := op.bounds(at)
	runs, err := r.oncePerRuns(ctx, ld)
	var done *lease.Run
	for i, run := range runs {
		if run.Token != ld.info.Token && !r.runStart(run).Before(start) && op.counts(run) {
			done = &runs[i]
			break
		}
	}
	clock := "this host's clock"
	if onStore {
		clock = "the store's clock"
	}
	// Read now: a time on today's date is said as a time of day, as every
	// other line says it (say.Time).
	now := wallclock.Now().In(op.Period.Location())
	what := op.text(start, end, clock, now)
	late := op.Deadline > 0 && at.Sub(start) > op.Deadline
	if err == nil && done == nil && !late {
		if op.Within == 0 {
			ld.periodStart, ld.periodEnd = start, end
		}
		r.log.Info(fmt.Sprintf("lease %s: no %s run yet %s; running %s", r.rc.Name, op.countsText(), what, r.args[0]), "event", "once_per_due")
		return nil
	}
	ld.keeper.Stop()
	releaseLease(ld, r.timing, r.log)
	ld.prot.finish(true, r.log)
	if err == nil && done == nil {
		return r.pastDeadline(what, at.Sub(start))
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = lease.NewError("the store did not answer in time", lease.ErrUnavailable, err)
		}
		return newOutcome(ExitFailure, slog.LevelError,
			fmt.Sprintf("lease %s: cannot read the run history to decide --once-per (%v); %s not started, the next run tries again", r.rc.Name, err, r.args[0]),
			"event", "store_unavailable", "lease", r.rc.Name)
	}
	o := newOutcome(op.Code, slog.LevelInfo,
		fmt.Sprintf("lease %s: already done %s: %s %s, started %s, token %d; %s not started",
			r.rc.Name, what, done.Label, runVerb(*done), say.TimeZone(r.runStart(*done), now), done.Token, r.args[0]),
		"event", "not_needed", "lease", r.rc.Name)
	r.mon.skipped(r.rc.Name, o.Msg) // a ping only with --ping-skipped, as for a held lease
	return o
}

// oncePerRuns reads the run history under the lease ld. A read the store
// did not answer in time, or answered as unavailable, is tried again after
// a pause (lease.FirstRetry, doubling up to a second) while ld's keeper
// holds the lease and ctx (INT, TERM) allows: a slow store is a wait, not
// an error (beside stress-ng an etcd read outlasted its call timeout, and
// a tick exited 125 with the store up). Any other error ends it at once,
// and so does the lease's loss, with the read's last error.
func (r *runState) oncePerRuns(ctx context.Context, ld *leadership) ([]lease.Run, error) {
	pause := lease.FirstRetry
	for {
		cctx, cancel := context.WithTimeout(ctx, r.timing.CallTimeout)
		runs, err := r.store.Runs(cctx, r.rc.Name, 0)
		cancel()
		if err == nil || !(errors.Is(err, lease.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) || ctx.Err() != nil {
			return runs, err
		}
		r.log.Debug("reading the run history failed; trying again while the lease is held", "lease", r.rc.Name, "err", err, "retry_in", pause)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ld.keeper.Done():
			t.Stop()
			return nil, err
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		pause = min(2*pause, time.Second)
	}
}

// pastDeadline is the outcome of a period found not done after its
// --once-per-deadline: nothing is started, as for a period done, with a
// line of its own.
func (r *runState) pastDeadline(what string, since time.Duration) *Outcome {
	op := r.rc.OncePer
	o := newOutcome(op.Code, slog.LevelInfo,
		fmt.Sprintf("lease %s: no %s run %s, but it began %s ago, past --once-per-deadline %s: too late to run it; %s not started",
			r.rc.Name, op.countsText(), what, lease.FormatDuration(since.Round(time.Second)), lease.FormatDuration(op.Deadline), r.args[0]),
		"event", "past_deadline", "lease", r.rc.Name)
	r.mon.skipped(r.rc.Name, o.Msg)
	return o
}

// bounds is the span the history is searched for a run that counts, for
// a lease acquired at at: the period holding at, or with --once-within
// the window of that length that ends at at.
func (o OncePerConfig) bounds(at time.Time) (start, end time.Time) {
	if o.Within > 0 {
		return at.Add(-o.Within), at
	}
	return o.Period.Bounds(at)
}

// text says which span bounds found, for a line read at now: periodText's,
// or "within the last 24h (since 10:00:03 UTC, on the store's clock)".
func (o OncePerConfig) text(start, end time.Time, clock string, now time.Time) string {
	if o.Within > 0 {
		return fmt.Sprintf("within the last %s (since %s, on %s)", lease.FormatDuration(o.Within), say.TimeZone(start, now.In(time.UTC)), clock)
	}
	return periodText(o.Period, start, end, clock, now)
}

// counts reports whether run makes the period done: it succeeded (exit
// 0), or with --once-per-any it ended any way other than never starting
// COMMAND. A run without an end (still going, or its leaderrun was killed)
// never counts.
func (o OncePerConfig) counts(run lease.Run) bool {
	if o.Any {
		return run.Ended() && run.Outcome != lease.OutcomeNotStarted
	}
	return run.Outcome == lease.OutcomeOK
}

func (o OncePerConfig) countsText() string {
	if o.Any {
		return "ended"
	}
	return "successful"
}

// periodText says which period, for a line read at now: "this day
// (2026-11-25 00:00 to 2026-11-26 00:00 UTC, on the store's clock)",
// "this period of '0 21 * * *' (2026-11-24 21:00 to 2026-11-25 21:00 UTC,
// on ...)", "this hour (14:00 to 15:00 UTC, on ...)", "this 4s period
// (19:14:48 to 19:14:52 UTC, on ...)": the times of day alone when both
// ends fall on today's date, as say.Time says a time.
func periodText(p lease.Period, start, end time.Time, clock string, now time.Time) string {
	loc := p.Location()
	s, e := start.In(loc), end.In(loc)
	today := say.SameDay(s, e) && say.SameDay(s, now.In(loc))
	if !p.Calendar() {
		layout := time.TimeOnly
		if !today {
			layout = time.DateTime
		}
		return fmt.Sprintf("this %s period (%s to %s %s, on %s)", p, s.Format(layout), e.Format(layout), e.Format("MST"), clock)
	}
	what := strings.Fields(p.String())[0]
	if p.Schedule() != "" {
		what = "period of '" + p.Schedule() + "'"
	}
	layout := "2006-01-02 15:04"
	if today {
		layout = "15:04"
	}
	return fmt.Sprintf("this %s (%s to %s %s, on %s)", what, s.Format(layout), e.Format(layout), e.Format("MST"), clock)
}

// runVerb says how a run that counted ended.
func runVerb(run lease.Run) string {
	if run.Outcome == lease.OutcomeOK {
		return "succeeded"
	}
	return fmt.Sprintf("ended %s (exit %d)", run.Outcome, run.ExitCode)
}

// endBeforeRelease writes the run's end into the history before the lease
// is released, with --once-per: the next holder decides from it, and
// would run COMMAND again if it found the run without its end. finish
// writes the end again after the release only when the release changed it
// (the lease was no longer ours): runRecord.end skips the same end.
//
// A write the store is too slow for is tried again while the lease is
// certainly ours (runRecord.endWhileHeld).
func (r *runState) endBeforeRelease(ld *leadership, ch childRun, cause error, treeGone bool) {
	if !r.rc.OncePer.On {
		return
	}
	o, ro := r.outcome(ch.res, ch, cause, treeGone)
	ch.rec.endWhileHeld(ld.left(r.timing.TTL), ro, o.Code, ch.res.Signal) // without an expiry, a TTL of tries
}

// The --once-per period a run is for, in its child's environment: a run
// that catches up a missed period knows which one it is for.
const (
	EnvPeriodStart = "LEADERRUN_PERIOD_START"
	EnvPeriodEnd   = "LEADERRUN_PERIOD_END"
)

// periodEnviron sets the period's variables in env (RFC 3339 in loc, the
// period's zone: UTC for a fixed one) when start is not zero, and removes
// any it inherited otherwise: an outer leaderrun's period is not this
// lease's.
func periodEnviron(env []string, start, end time.Time, loc *time.Location) []string {
	out := slices.DeleteFunc(env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == EnvPeriodStart || k == EnvPeriodEnd
	})
	if start.IsZero() {
		return out
	}
	return append(out,
		EnvPeriodStart+"="+start.In(loc).Format(time.RFC3339Nano),
		EnvPeriodEnd+"="+end.In(loc).Format(time.RFC3339Nano))
}
