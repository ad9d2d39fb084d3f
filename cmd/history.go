package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaderrun/leaderrun/internal/leaseview"
	"github.com/leaderrun/leaderrun/lease"
)

// ExitCheckMissed is check's code when no run (no successful run, with
// --succeeded) started within --ran-within: 2, "critical" in the
// convention of monitoring plugins (Nagios, Icinga, Sensu), which read 0 as
// OK; it is not status's 3 ("free", "unknown" to a monitoring system) nor
// 125 (check itself failed).
const ExitCheckMissed = 2

const historyDescription = `Prints the last runs of the lease NAME, newest first, as the store recorded
them (every leaderrun that held the lease, on any host):

   START–END ZONE  HOLDER  OUTCOME (exit N[, SIGNAL])  token T

OUTCOME is ok, failed, lost (124), stepped-down (123), stopped (leaderrun
was sent INT or TERM while the command ran), not-started (the lease was taken
but the command never started), running, or "no end recorded": leaderrun died
(SIGKILL, a crash, a power cut) before it could write the end. --json prints
an array of {"name","holder","token","start","end","outcome","exit_code",
"signal","version","running"} instead ("exit_code" is null for a run without
an end; a run in a slot has "slot" and "slots" too, its holder without
"(slot K of N)"). --format prom prints Prometheus metrics of every run the store keeps
(or those --limit and --since select) instead: leaderrun_history_runs by
outcome, leaderrun_history_running, leaderrun_history_last_start_timestamp_seconds
and leaderrun_history_last_success_timestamp_seconds, labelled with the name. The store keeps the last 100 runs per name: each run trims to its
own --history-keep, so the smallest one in use wins (give every host the
same). Entries that are not records leaderrun wrote (another program's,
or dated more than 5 minutes ahead of this host's clock) are not shown.
Exit codes: 0, 125 error (usage, configuration, store, a store that keeps no
history).`

const checkDescription = `Says whether a run of the lease NAME started within --ran-within, on any
host: exit 0 when one did (one that ended with exit 0, with --succeeded), 2
when none did, with one line on what was last seen; for a monitoring
system's command check, or a timer that alerts:

   leaderrun check --store URL --ran-within 25h --succeeded nightly-backup

A run that is still going counts for --ran-within, not for --succeeded; a run
whose lease was taken but whose command never started does not count, and
neither do instances that found the lease taken (75) or a --hold-at-least
slot already used, nor records dated more than 5 minutes ahead of this
host's clock. --json prints {"name","ok","ran_within_ms","succeeded",
"match","last_run"} instead (runs as in history --json).
Exit codes: 0 a run was found, 2 none was, 125 error (usage, configuration,
store, a store that keeps no history).`

// openHistory opens the store of a history or check command and returns
// its history.
func openHistory(ctx context.Context, o *options, name string, e env, log *slog.Logger) (lease.Store, lease.History, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, nil, usageError{err}
	}
	if err := e.dispatch(o.store); err != nil {
		return nil, nil, err
	}
	store, err := openForReading(ctx, o.store, o.spell, e, log)
	if err != nil {
		return nil, nil, err
	}
	return store, store, nil
}

// runJSON is a run in history's --json output; Running is true for a
// current holder's run (with --slots, any slot's).
type runJSON = leaseview.Run

// historyCommand prints the last runs of name.
func historyCommand(ctx context.Context, o *options, name string, e env, log *slog.Logger) *outcome {
	format, err := historyFormat(o.format, o.json)
	if err != nil {
		return classify(err)
	}
	limit := o.limit
	if format == "prom" && !o.isGiven(&o.limit) {
		limit = 0 // the metrics count every run the store keeps
	}
	if limit < 0 {
		return classify(usagef("--limit %d: want 0 (all) or more", limit))
	}
	since := o.since
	if since < 0 || since == 0 && o.isGiven(&o.since) {
		// 0 would mean no bound, as leaving the flag out does: a window of
		// nothing given explicitly is a mistake, as a negative one is.
		return classify(usagef("--since %s: want a positive duration such as 24h (leave it out for no bound)", lease.FormatDuration(since)))
	}
	store, h, err := openHistory(ctx, o, name, e, log)
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fetch := limit
	if since > 0 {
		fetch = 0 // the window, not the count, decides
	}
	runs, current, err := leaseview.Runs(sctx, store, h, name, fetch)
	if err != nil {
		return classify(err)
	}
	now := time.Now()
	out := []runJSON{}
	for _, r := range runs {
		if since > 0 && r.Start.Before(now.Add(-since)) {
			break // newest first: the rest are older still
		}
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, runJSON{Run: r, Running: current.Running(r)})
	}
	if format == "prom" {
		e.stdio.Out.Write(historyMetrics(name, out))
	} else if format == "json" {
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.stdio.Out, string(b))
	} else if len(out) == 0 && since > 0 && len(runs) > 0 {
		fmt.Fprintf(e.stdio.Out, "%s: no runs started within %s\n", name, humanDuration(since))
	} else if len(out) == 0 {
		fmt.Fprintf(e.stdio.Out, "%s: no runs recorded\n", name)
	} else {
		for _, r := range out {
			fmt.Fprintln(e.stdio.Out, runLine(r.Run, r.Running, now))
		}
	}
	return &outcome{code: 0, level: slog.LevelDebug, msg: fmt.Sprintf("%d runs of lease %s", len(out), name)}
}

// runLine is one run in history's text output.
func runLine(r lease.Run, running bool, now time.Time) string {
	return fmt.Sprintf("%s  %s  %s  token %d", runSpan(r, now), printable(r.Label), runResult(r, running), r.Token)
}

// runSpan is a run's start and end: "02:00:03–02:04:41 UTC", with the
// start's date when not today and the end's when not the start's, or
// "02:00:03 UTC–" without an end.
func runSpan(r lease.Run, now time.Time) string {
	start := r.Start.In(now.Location())
	zone := start.Format("MST")
	if !r.Ended() {
		return FormatTime(start, now) + " " + zone + "–"
	}
	end := r.End.In(now.Location())
	endText := end.Format(time.TimeOnly)
	if !sameDay(start, end) {
		endText = end.Format(time.DateTime) // across midnight: both dates
	}
	return FormatTime(start, now) + "–" + endText + " " + zone
}

// runResult is how a run ended: "ok (exit 0)", "failed (exit 137,
// SIGKILL)", "running", "no end recorded".
func runResult(r lease.Run, running bool) string {
	switch {
	case running:
		return "running"
	case !r.Ended():
		return "no end recorded (leaderrun was killed, could not write the end to the store, or is still running)"
	}
	s := fmt.Sprintf("%s (exit %d", printable(string(r.Outcome)), r.ExitCode)
	if r.Signal != "" {
		s += ", " + printable(r.Signal)
	}
	return s + ")"
}

// lastRunText is status's "last run:" line: the holder, the span, and the
// exit code or what is known instead.
func lastRunText(r lease.Run, now time.Time) string {
	s := fmt.Sprintf("last run: %s, %s", printable(r.Label), runSpan(r, now))
	switch {
	case !r.Ended():
		return s + ", no end recorded"
	case r.Outcome == lease.OutcomeOK:
		return s + fmt.Sprintf(", exit %d", r.ExitCode)
	default:
		return s + ", " + runResult(r, false)
	}
}

// checkJSON is check's --json output.
type checkJSON struct {
	Name        string         `json:"name"`
	OK          bool           `json:"ok"`
	RanWithinMS int64          `json:"ran_within_ms"`
	Succeeded   bool           `json:"succeeded"`
	Match       *leaseview.Run `json:"match,omitempty"`
	LastRun     *leaseview.Run `json:"last_run,omitempty"`
}

// checkCommand exits 0 when a run (a successful one, with --succeeded) of
// name started within --ran-within, else ExitCheckMissed.
func checkCommand(ctx context.Context, o *options, name string, e env, log *slog.Logger) *outcome {
	within := o.ranWithin
	if !o.isGiven(&o.ranWithin) {
		return classify(usagef("check needs --ran-within DURATION, such as 25h for a daily job"))
	}
	if within <= 0 {
		return classify(usagef("--ran-within %v: want a duration above zero, such as 25h for a daily job", within))
	}
	succeeded := o.succeeded
	store, h, err := openHistory(ctx, o, name, e, log)
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	runs, current, err := leaseview.Runs(sctx, store, h, name, 0)
	if err != nil {
		return classify(err)
	}
	now := time.Now()
	out := checkJSON{Name: name, RanWithinMS: within.Milliseconds(), Succeeded: succeeded}
	match, last := leaseview.MatchRun(runs, now, within, succeeded)
	out.Match, out.LastRun = leaseview.RunOf(match), leaseview.RunOf(last)
	out.OK = match != nil
	what := "run"
	if succeeded {
		what = "successful run"
	}
	var line string
	switch {
	case out.OK:
		line = fmt.Sprintf("OK: %s: a %s started %s ago: %s", name, what, humanAgo(now.Sub(match.Start)), checkRunText(*match, current, now))
	case last == nil:
		line = fmt.Sprintf("MISSED: %s: no %s within %s; no run recorded", name, what, humanDuration(within))
	default:
		line = fmt.Sprintf("MISSED: %s: no %s within %s; last run started %s ago: %s", name, what, humanDuration(within), humanAgo(now.Sub(last.Start)), checkRunText(*last, current, now))
	}
	if o.json {
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.stdio.Out, string(b))
	} else {
		fmt.Fprintln(e.stdio.Out, line)
	}
	if !out.OK {
		return &outcome{code: ExitCheckMissed, level: slog.LevelDebug, msg: line}
	}
	return &outcome{code: 0, level: slog.LevelDebug, msg: line}
}

// checkRunText describes a run on check's line.
func checkRunText(r lease.Run, current leaseview.Holding, now time.Time) string {
	return fmt.Sprintf("%s, %s, %s", printable(r.Label), runSpan(r, now), runResult(r, current.Running(r)))
}

// humanAgo rounds an age for check's line: whole minutes from an hour up.
func humanAgo(d time.Duration) string {
	if d >= time.Hour {
		d = d.Round(time.Minute)
	}
	return humanDuration(max(d, 0))
}
