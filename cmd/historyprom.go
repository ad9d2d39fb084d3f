package cmd

import (
	"slices"
	"strconv"

	"github.com/leaderrun/leaderrun/internal/promtext"
	"github.com/leaderrun/leaderrun/lease"
)

// history --format prom: the store's run history of a lease as Prometheus
// metrics, for one exporter host that speaks for every host (a cron job
// writing them into node_exporter's textfile directory), so that one place
// can alert when no host ran the job.

// outcomeNoEnd is the outcome label of the runs whose end was not written
// (running, or leaderrun was killed).
const outcomeNoEnd = "no-end"

// outcomeUnknown is the outcome label of the ended runs whose outcome this
// version does not know.
const outcomeUnknown = "unknown"

// historyMetrics renders runs (newest first, as history --json shows them)
// of the lease name.
func historyMetrics(name string, runs []runJSON) []byte {
	var w promtext.Writer
	l := []string{"name", name}
	counts := map[string]int{}
	var lastSuccess, lastStart *lease.Run
	running := 0
	for i := range runs {
		r := &runs[i].Run
		if runs[i].Running {
			running++
		}
		switch {
		case !r.Ended():
			counts[outcomeNoEnd]++
		case slices.Contains(promtext.Outcomes, r.Outcome):
			counts[string(r.Outcome)]++
		default:
			// Written by another version, or forged in a shared history:
			// counted, so that the counts add up to the runs.
			counts[outcomeUnknown]++
		}
		if lastStart == nil && r.Outcome != lease.OutcomeNotStarted {
			lastStart = r
		}
		if lastSuccess == nil && r.Outcome == lease.OutcomeOK {
			lastSuccess = r
		}
	}
	w.Family("leaderrun_history_runs", "gauge", "Runs of the lease in the store's run history (which keeps the last ones), by outcome; no-end: the end was not written (running, leaderrun was killed, or the store was out at the end); unknown: an outcome this version does not know.")
	for _, o := range promtext.Outcomes {
		w.Sample("leaderrun_history_runs", strconv.Itoa(counts[string(o)]), append(l, "outcome", string(o))...)
	}
	w.Sample("leaderrun_history_runs", strconv.Itoa(counts[outcomeNoEnd]), append(l, "outcome", outcomeNoEnd)...)
	w.Sample("leaderrun_history_runs", strconv.Itoa(counts[outcomeUnknown]), append(l, "outcome", outcomeUnknown)...)
	w.Gauge("leaderrun_history_running", "The runs of the lease going on: 0 or 1, up to N with --slots N.", strconv.Itoa(running), l...)
	if lastStart != nil {
		w.Gauge("leaderrun_history_last_start_timestamp_seconds", "When the newest run of the lease that started its command started, on any host (Unix time).", promtext.Unix(lastStart.Start), l...)
	}
	if lastSuccess != nil {
		w.Gauge("leaderrun_history_last_success_timestamp_seconds", "When the newest run of the lease that exited 0 ended, on any host (Unix time).", promtext.Unix(lastSuccess.End), l...)
	}
	return w.Bytes()
}

// historyFormat is history's output format from --format and --json.
func historyFormat(format string, json bool) (string, error) {
	switch {
	case json && format != "" && format != "json":
		return "", usagef("--json and --format %s: give one", format)
	case json:
		return "json", nil
	case format == "":
		return "text", nil
	case format == "text" || format == "json" || format == "prom":
		return format, nil
	}
	return "", usagef("--format %s: want text, json or prom", format)
}
