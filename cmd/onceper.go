package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
)

// --once-per PERIOD: whoever takes the lease runs COMMAND only when the
// store's run history holds no successful run (--once-per-any: no ended
// run) that started in the current period. The decision is made under the
// lease, and a run's end is written before its release, so the next holder
// always reads it: two holders never both find the period not done.

// oncePerConfig is the validated form of the --once-per flags; a zero
// period means --once-per was not given.
type oncePerConfig struct {
	period lease.Period
	on     bool
	any    bool // --once-per-any: any run that ended counts
	code   int  // --once-per-exit-code
}

// DefaultOncePerZone is the time zone of --once-per's calendar periods
// when --once-per-zone is not given: UTC, so that hosts set to different
// zones still agree on when a day begins.
const DefaultOncePerZone = "UTC"

// parseOncePer reads --once-per, --once-per-zone, --once-per-any and
// --once-per-exit-code. historyKeep is --history-keep: the decision reads
// the history, so recording none is refused.
func parseOncePer(c *cli.Context, historyKeep int) (oncePerConfig, error) {
	var o oncePerConfig
	s := c.String("once-per")
	if s == "" {
		return o, nil // --once-per-zone and the others are ignored without it
	}
	zone := c.String("once-per-zone")
	loc, err := loadZone(zone)
	if err != nil {
		return o, err
	}
	if o.period, err = lease.ParsePeriod(s, loc); err != nil {
		// Its one error (lease.ErrBadPeriod), said of the flag.
		return o, usagef("--once-per %q: want %s", s, lease.PeriodForms())
	}
	if !o.period.Calendar() && loc != time.UTC {
		return o, usagef("--once-per-zone %s applies to hour, day, week and month; a duration such as --once-per %s is counted from the Unix epoch in UTC", zone, s)
	}
	if historyKeep == 0 {
		return o, usagef("--once-per reads the run history, and --history-keep 0 records none; leave --history-keep out or give it at least 1")
	}
	o.on, o.any, o.code = true, c.Bool("once-per-any"), c.Int("once-per-exit-code")
	if o.code < 0 || o.code > 255 {
		return o, usagef("--once-per-exit-code %d: want 0-255", o.code)
	}
	return o, nil
}

// loadZone reads --once-per-zone: an IANA zone name (Europe/Berlin), UTC,
// or Local for this host's zone (TZ, /etc/localtime).
func loadZone(zone string) (*time.Location, error) {
	switch strings.TrimSpace(zone) {
	case "", "UTC", "utc", "Z":
		return time.UTC, nil
	case "Local", "local":
		return time.Local, nil
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || strings.ContainsAny(zone, "\n\r") {
		return nil, usagef("--once-per-zone %q: want an IANA time zone name such as Europe/Berlin (from /usr/share/zoneinfo), UTC, or Local", zone)
	}
	return loc, nil
}

// oncePerUsable refuses --once-per on a store that keeps no run history,
// before any lease is taken.
func (r *runState) oncePerUsable() *outcome {
	if _, ok := r.store.(lease.History); r.rc.oncePer.on && !ok {
		return classify(usagef("--once-per reads the run history, and this store keeps none"))
	}
	return nil
}

// oncePerClock returns the instant --once-per decides the period of, for
// a lease just acquired as info: the acquisition on the store's clock
// where its tokens count it (the acquisition's own token), else the
// acquisition on this host's clock, which is also the start the history
// records for the run (info.Since, set here if the store left it zero).
// Deciding on a later "now" would let a run acquired just before a
// period's end be decided for the next period but recorded in this one,
// where the next holder would not count it for the period it ran for.
// runStart is when a recorded run started on that same clock.
func (r *runState) oncePerClock(info *lease.Holder) (at time.Time, onStore bool) {
	if _, ok := r.store.(lease.ClockTokens); ok && info.Token != 0 {
		return lease.TokenTime(info.Token), true
	}
	if info.Since.IsZero() {
		info.Since = wallclock.Now()
	}
	return info.Since, false
}

func (r *runState) runStart(run lease.Run) time.Time {
	if _, ok := r.store.(lease.ClockTokens); ok {
		return lease.TokenTime(run.Token)
	}
	return run.Start
}

// oncePerDone decides, under the lease ld, whether the current period
// still needs a run. It returns nil to run COMMAND, or else the "not
// needed" outcome (or a failure to read the history) after releasing the
// lease: no child is started, no run is recorded.
func (r *runState) oncePerDone(ld *leadership) *outcome {
	op := r.rc.oncePer
	if !op.on {
		return nil
	}
	h, _ := r.store.(lease.History)
	at, onStore := r.oncePerClock(&ld.info)
	start, end := op.period.Bounds(at)
	ctx, cancel := context.WithTimeout(context.Background(), r.timing.CallTimeout)
	runs, err := h.Runs(ctx, r.rc.name, 0)
	cancel()
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
	what := periodText(op.period, start, end, clock)
	if err == nil && done == nil {
		r.log.Info(fmt.Sprintf("lease %s: no %s run yet %s; running %s", r.rc.name, op.countsText(), what, r.args[0]), "event", "once_per_due")
		return nil
	}
	ld.keeper.Stop()
	releaseLease(ld.l, r.timing, r.log)
	ld.prot.finish(true, r.log)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = lease.NewError("the store did not answer in time", lease.ErrUnavailable, err)
		}
		return newOutcome(ExitFailure, slog.LevelError,
			fmt.Sprintf("lease %s: cannot read the run history to decide --once-per (%v); %s not started, the next run tries again", r.rc.name, err, r.args[0]),
			"event", "store_unavailable", "lease", r.rc.name)
	}
	o := newOutcome(op.code, slog.LevelInfo,
		fmt.Sprintf("lease %s: already done %s: %s %s, started %s, token %d; %s not started",
			r.rc.name, what, done.Label, runVerb(*done), zoneTime(r.runStart(*done), op.period.Location()), done.Token, r.args[0]),
		"event", "not_needed", "lease", r.rc.name)
	r.mon.skipped(r.rc.name, o.msg) // a ping only with --ping-skipped, as for a held lease
	return o
}

// counts reports whether run makes the period done: it succeeded (exit
// 0), or with --once-per-any it ended any way other than never starting
// COMMAND. A run without an end (still going, or its leaderrun was killed)
// never counts.
func (o oncePerConfig) counts(run lease.Run) bool {
	if o.any {
		return run.Ended() && run.Outcome != lease.OutcomeNotStarted
	}
	return run.Outcome == lease.OutcomeOK
}

func (o oncePerConfig) countsText() string {
	if o.any {
		return "ended"
	}
	return "successful"
}

// periodText says which period: "this day (2026-11-25 00:00 to
// 2026-11-26 00:00 UTC, on the store's clock)", "this 4s period (19:14:48
// to 19:14:52 UTC, on ...)".
func periodText(p lease.Period, start, end time.Time, clock string) string {
	loc := p.Location()
	s, e := start.In(loc), end.In(loc)
	if !p.Calendar() {
		layout := time.TimeOnly
		if !sameDay(s, e) || !sameDay(s, time.Now().In(loc)) {
			layout = time.DateTime
		}
		return fmt.Sprintf("this %s period (%s to %s %s, on %s)", p, s.Format(layout), e.Format(layout), e.Format("MST"), clock)
	}
	return fmt.Sprintf("this %s (%s to %s, on %s)", strings.Fields(p.String())[0], s.Format("2006-01-02 15:04"), e.Format("2006-01-02 15:04 MST"), clock)
}

// runVerb says how a run that counted ended.
func runVerb(run lease.Run) string {
	if run.Outcome == lease.OutcomeOK {
		return "succeeded"
	}
	return fmt.Sprintf("ended %s (exit %d)", run.Outcome, run.ExitCode)
}

func zoneTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// endBeforeRelease writes the run's end into the history before the lease
// is released, with --once-per: the next holder decides from it, and
// would run COMMAND again if it found the run without its end. finish
// writes the end again after the release only when the release changed it
// (the lease was no longer ours): runRecord.end skips the same end.
func (r *runState) endBeforeRelease(ch childRun, cause error, treeGone bool) {
	if !r.rc.oncePer.on {
		return
	}
	o, ro := r.outcome(ch.res, ch, cause, treeGone)
	ch.rec.end(ro, o.code, ch.res.Signal)
}
