package cmd

import (
	"strconv"

	"github.com/leaderrun/leaderrun/lease"
)

// history --format prom: the store's run history of a lease as Prometheus
// metrics, for one exporter host that speaks for every host (a cron job
// writing them into node_exporter's textfile directory), so that one place
// can alert when no host ran the job.

// outcomeNoEnd is the outcome label of the runs whose end was not written
// (running, or leaderrun was killed).
const outcomeNoEnd = "no-end"

// historyMetrics renders runs (newest first, as history --json shows them)
// of the lease name.
func historyMetrics(name string, runs []runJSON) []byte {
	var w promWriter
	l := []string{"name", name}
	counts := map[string]int{}
	var lastSuccess, lastStart *lease.Run
	running := 0
	for i := range runs {
		r := &runs[i].Run
		if runs[i].Running {
			running = 1
		}
		if r.Ended() {
			counts[string(r.Outcome)]++
		} else {
			counts[outcomeNoEnd]++
		}
		if lastStart == nil && r.Outcome != lease.OutcomeNotStarted {
			lastStart = r
		}
		if lastSuccess == nil && r.Outcome == lease.OutcomeOK {
			lastSuccess = r
		}
	}
	w.family("leaderrun_history_runs", "gauge", "Runs of the lease in the store's run history (which keeps the last ones), by outcome; no-end: the end was not written (running, or leaderrun was killed).")
	for _, o := range metricOutcomes {
		w.sample("leaderrun_history_runs", strconv.Itoa(counts[string(o)]), append(l, "outcome", string(o))...)
	}
	w.sample("leaderrun_history_runs", strconv.Itoa(counts[outcomeNoEnd]), append(l, "outcome", outcomeNoEnd)...)
	w.gauge("leaderrun_history_running", "1 while a run of the lease is going on, else 0.", strconv.Itoa(running), l...)
	if lastStart != nil {
		w.gauge("leaderrun_history_last_start_timestamp_seconds", "When the newest run of the lease that started its command started, on any host (Unix time).", promUnix(lastStart.Start), l...)
	}
	if lastSuccess != nil {
		w.gauge("leaderrun_history_last_success_timestamp_seconds", "When the newest run of the lease that exited 0 ended, on any host (Unix time).", promUnix(lastSuccess.End), l...)
	}
	return w.b.Bytes()
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
