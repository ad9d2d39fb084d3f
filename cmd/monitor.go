package cmd

import (
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/lease"
)

// Telling the monitoring: --ping and --metrics-file. Both speak for the
// instance that ran the child only, and neither is on the critical path:
// the child starts without waiting for them, a failure is one warning line
// and never changes the exit code, and at the run's end they add at most
// pingExitBound.

// monitorVars are the monitoring flags' variables: a leaderrun started by
// the child must not ping the same check or overwrite the same file as its
// own, so the child does not get them (unless --pass-env names them).
var monitorVars = []string{"LEADERRUN_PING", "LEADERRUN_METRICS_FILE"}

// monitorFlags are the run's monitoring flags.
func monitorFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ping", EnvVars: []string{"LEADERRUN_PING"}, Usage: "when this instance runs COMMAND, ping `URL` as dead-man's-switch services expect (healthchecks.io): URL/start at the start, URL on exit 0, URL/CODE otherwise; never delays the run (at most 2s more at its end); the URL's path and query are kept secret"},
		&cli.BoolFlag{Name: "ping-skipped", EnvVars: []string{"LEADERRUN_PING_SKIPPED"}, DisableDefaultText: true, Usage: "with --ping, an instance that did not run COMMAND (the lease was held and --wait ran out) pings URL/log, which records an event without changing the check's state"},
		&cli.StringFlag{Name: "metrics-file", EnvVars: []string{"LEADERRUN_METRICS_FILE"}, Usage: "when this instance has run COMMAND, write the run's metrics to `PATH` in Prometheus' text format (node_exporter's textfile collector: a *.prom file in its directory), replaced atomically"},
	}
}

// monitorConfig is the validated form of the monitoring flags.
type monitorConfig struct {
	ping        *url.URL // nil: no --ping
	pingProgram string   // the program that sends the pings
	pingSkipped bool
	metricsFile string
}

// parseMonitor validates the monitoring flags.
func parseMonitor(c *cli.Context) (monitorConfig, error) {
	m := monitorConfig{pingSkipped: c.Bool("ping-skipped"), metricsFile: c.String("metrics-file")}
	if err := checkMetricsFile(m.metricsFile); err != nil {
		return m, err
	}
	raw := c.String("ping")
	if raw == "" {
		if m.pingSkipped {
			return m, usagef("--ping-skipped needs --ping URL")
		}
		return m, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		// Not even the host: a URL that does not parse may have its key
		// anywhere.
		return m, usagef("--ping: want an http:// or https:// URL such as https://hc-ping.com/UUID (not shown: it may hold a secret)")
	}
	if m.pingProgram, err = findPingProgram(); err != nil {
		return m, err
	}
	m.ping = u
	return m, nil
}

// pingOrigin is the part of a ping URL that may be shown: scheme and host.
// The path (healthchecks' UUID or ping key), user info and query are
// secrets.
func pingOrigin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// monitor tells the monitoring about one run.
type monitor struct {
	cfg   monitorConfig
	log   *slog.Logger
	ping  *pinger // nil until the child starts, or without --ping
	start time.Time
}

func newMonitor(cfg monitorConfig, log *slog.Logger) *monitor {
	return &monitor{cfg: cfg, log: log}
}

// started is called as the child starts: it records the time and sends the
// start ping in the background.
func (m *monitor) started() {
	m.start = time.Now()
	if m.cfg.ping != nil {
		m.ping = startPinger(m.cfg.pingProgram, m.cfg.ping, m.log)
		m.ping.send("start", "")
	}
}

// ended is called once the run is over: it sends the end ping and writes
// the metrics file; wait then waits for the pings.
func (m *monitor) ended(r runReport) {
	if m.start.IsZero() {
		return // the child never started: nothing ran here
	}
	r.start = m.start
	if m.ping != nil {
		kind := ""
		if r.code != 0 {
			kind = strconv.Itoa(r.code)
		}
		m.ping.send(kind, pingBody(r))
		m.ping.close()
	}
	if m.cfg.metricsFile != "" {
		if err := writeMetricsFile(m.cfg.metricsFile, r); err != nil {
			m.log.Warn("metrics file not written: "+err.Error(), "event", "metrics_not_written")
		}
	}
}

// wait waits for the pings, at most pingExitBound after ended.
func (m *monitor) wait() { m.ping.wait() }

// skipped is called when this instance did not run the child because the
// lease was held: with --ping-skipped it pings URL/log.
func (m *monitor) skipped(name, line string) {
	if m.cfg.ping == nil || !m.cfg.pingSkipped {
		return
	}
	m.ping = startPinger(m.cfg.pingProgram, m.cfg.ping, m.log)
	m.ping.send("log", bounded("leaderrun: lease "+name+": skipped: "+line))
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
func runReportOf(rc runConfig, ld *leadership, o *outcome, ro lease.Outcome) runReport {
	return runReport{name: rc.name, holder: rc.holder, token: ld.info.Token, end: time.Now(),
		waited: ld.waited, outcome: ro, code: o.code, renewalsFailed: ld.keeper.RenewalsFailed(), line: o.msg}
}
