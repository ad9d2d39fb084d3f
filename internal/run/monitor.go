package run

import (
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/pingwire"
	"github.com/leaderrun/leaderrun/lease"
)

// Telling the monitoring: --ping and --metrics-file. Both speak for the
// instance that ran the child only, and neither is on the critical path:
// the child starts without waiting for them, a failure is one warning line
// and never changes the exit code, and at the run's end they add at most
// pingExitBound.

// monitorVars are the monitoring flags' variables: a leaderrun started by
// the child must not ping the same check or overwrite the same file as its
// own, nor bind the address of its --listen or label its Pod, so the child does not get
// them (unless --pass-env names them); nor --ping's companions, which
// without --ping would refuse its run.
var monitorVars = []string{"LEADERRUN_PING", "LEADERRUN_PING_FORMAT", "LEADERRUN_PING_SKIPPED", "LEADERRUN_PING_OUTPUT_TAIL", "LEADERRUN_METRICS_FILE", "LEADERRUN_LISTEN", "LEADERRUN_POD_LABEL"}

// pingOrigin is the part of a ping URL that may be shown: scheme and host.
// The path (healthchecks' UUID or ping key), user info and query are
// secrets.
func pingOrigin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// monitor tells the monitoring about one run.
type monitor struct {
	cfg   MonitorConfig
	log   *slog.Logger
	ping  *pinger // nil until the child starts, or without --ping
	start time.Time
}

func newMonitor(cfg MonitorConfig, log *slog.Logger) *monitor {
	return &monitor{cfg: cfg, log: log}
}

// started is called as the child starts, at having been read right before
// its start: it records the time and sends the start ping in the
// background.
func (m *monitor) started(at time.Time) {
	m.start = at
	if m.cfg.Ping != nil {
		if m.ping == nil { // with --ping-output-tail, captureOutput started it
			m.ping = startPinger(m.cfg.PingProgram, m.cfg.Ping, m.cfg.PingFormat, m.log)
		}
		if m.cfg.PingFormat.HasStart() {
			m.ping.send(pingwire.Ping{Kind: "start"})
		}
	}
}

// ended is called once the run is over: it sends the end ping and writes
// the metrics file; wait then waits for the pings.
func (m *monitor) ended(r runReport) {
	if m.start.IsZero() {
		m.ping.close() // started for --ping-output-tail only: nothing to send
		return         // the child never started: nothing ran here
	}
	r.start = m.start
	if m.ping != nil {
		kind := "ok"
		if r.code != 0 {
			kind = strconv.Itoa(r.code)
		}
		m.ping.send(pingwire.Ping{Kind: kind, Took: r.end.Sub(r.start), Body: pingBody(r)})
		m.ping.close()
	}
	if m.cfg.MetricsFile != "" {
		if err := writeMetricsFile(m.cfg.MetricsFile, r); err != nil {
			m.log.Warn("metrics file not written: "+err.Error(), "event", "metrics_not_written")
		}
	}
}

// wait waits for the pings, at most pingExitBound after ended.
func (m *monitor) wait() { m.ping.wait() }

// skipped is called when this instance did not run the child because the
// lease was held: with --ping-skipped it pings URL/log.
func (m *monitor) skipped(name, line string) {
	if m.cfg.Ping == nil || !m.cfg.PingSkipped {
		return
	}
	m.ping = startPinger(m.cfg.PingProgram, m.cfg.Ping, m.cfg.PingFormat, m.log)
	m.ping.send(pingwire.Ping{Kind: "log", Body: bounded("leaderrun: lease " + name + ": skipped: " + line)})
	m.ping.close()
	m.ping.wait()
}

// pingBody is the end ping's body: the run's final line and its lease,
// never the child's output or arguments.
func pingBody(r runReport) string {
	return bounded("leaderrun: lease " + r.name + ", holder " + r.holder + ", token " + strconv.FormatUint(r.token, 10) +
		", outcome " + string(r.outcome) + ", " + r.end.Sub(r.start).Round(time.Millisecond).String() + ": " + r.line)
}

// maxPingBody bounds a ping's body (healthchecks.io keeps 100 kB).
const maxPingBody = 1000

// bounded makes s one line of at most maxPingBody bytes.
func bounded(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxPingBody {
		s = strings.ToValidUTF8(s[:maxPingBody], "")
	}
	return s
}

// runReportOf gathers what the monitoring is told of a finished run.
func runReportOf(rc Config, ld *leadership, o *Outcome, ro lease.Outcome) runReport {
	return runReport{name: rc.Name, holder: rc.Holder, token: ld.info.Token, end: time.Now(),
		waited: ld.waited, outcome: ro, code: o.Code, renewalsFailed: ld.keeper.RenewalsFailed(), line: o.Msg}
}
