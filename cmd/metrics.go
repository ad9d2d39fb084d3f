package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// --metrics-file: the instance that ran the child writes, when the run
// ends, a file in the Prometheus text format for node_exporter's textfile
// collector, describing that run. An instance that did not run (the lease
// was held elsewhere, --wait ran out) writes nothing: the file keeps the
// last run this host made, and a standby never races the host's own runner
// for it. It is replaced atomically (a temporary file in the same
// directory, fsync, rename), so a scrape never reads half of it.

// runReport is what the monitoring is told of a run this instance made.
type runReport struct {
	name, holder   string
	token          uint64
	start, end     time.Time // the child's start and the run's end, this host's clock
	waited         time.Duration
	outcome        lease.Outcome
	code           int
	renewalsFailed int
	line           string // the run's final line, as printed on stderr
}

// metricOutcomes are the values of leaderrun_last_run_outcome's outcome
// label: each is written, 1 for the run's and 0 for the others, so that a
// query need not know which series exist.
var metricOutcomes = []lease.Outcome{lease.OutcomeOK, lease.OutcomeFailed, lease.OutcomeLost,
	lease.OutcomeSteppedDown, lease.OutcomeStopped, lease.OutcomeNotStarted}

// metricLastSuccess is carried over from the file's previous version while
// the runs since have failed.
const metricLastSuccess = "leaderrun_last_success_timestamp_seconds"

// promLabel escapes a label value as the text format wants it.
func promLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// promFloat formats a sample value.
func promFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// promUnix is a time as a Unix timestamp in seconds, milliseconds kept.
func promUnix(t time.Time) string { return promFloat(float64(t.UnixMilli()) / 1000) }

// promWriter writes metric families in the text format.
type promWriter struct{ b bytes.Buffer }

// family writes a family's HELP and TYPE lines.
func (w *promWriter) family(name, typ, help string) {
	fmt.Fprintf(&w.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample; labels alternate names and values.
func (w *promWriter) sample(name, value string, labels ...string) {
	w.b.WriteString(name)
	if len(labels) > 0 {
		w.b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.b.WriteByte(',')
			}
			fmt.Fprintf(&w.b, `%s="%s"`, labels[i], promLabel(labels[i+1]))
		}
		w.b.WriteByte('}')
	}
	w.b.WriteString(" " + value + "\n")
}

// gauge writes a family of one sample.
func (w *promWriter) gauge(name, help, value string, labels ...string) {
	w.family(name, "gauge", help)
	w.sample(name, value, labels...)
}

// metricsText is the file's content for the run r; lastSuccess is the
// previous file's last success (zero: none known), used when r failed.
func metricsText(r runReport, lastSuccess float64) []byte {
	var w promWriter
	l := []string{"name", r.name, "holder", r.holder}
	w.gauge("leaderrun_last_run_start_timestamp_seconds", "When the last run on this host started its command (Unix time).", promUnix(r.start), l...)
	w.gauge("leaderrun_last_run_end_timestamp_seconds", "When the last run on this host ended (Unix time).", promUnix(r.end), l...)
	w.gauge("leaderrun_last_run_duration_seconds", "How long the last run on this host took, from the command's start to its end.", promFloat(r.end.Sub(r.start).Seconds()), l...)
	w.gauge("leaderrun_last_run_exit_code", "leaderrun's exit code for the last run on this host (the command's own, 128+N for signal N, 123 stepped down, 124 lost).", strconv.Itoa(r.code), l...)
	w.family("leaderrun_last_run_outcome", "gauge", "How the last run on this host ended: 1 for its outcome, 0 for the others.")
	for _, o := range metricOutcomes {
		v := "0"
		if o == r.outcome {
			v = "1"
		}
		w.sample("leaderrun_last_run_outcome", v, append(l, "outcome", string(o))...)
	}
	w.gauge("leaderrun_last_run_fencing_token", "The fencing token of the last run on this host.", strconv.FormatUint(r.token, 10), l...)
	w.gauge("leaderrun_last_run_renewals_failed", "Lease renewals of the last run on this host that failed and were retried.", strconv.Itoa(r.renewalsFailed), l...)
	w.gauge("leaderrun_last_run_lease_wait_seconds", "How long the last run on this host waited for the lease.", promFloat(r.waited.Seconds()), l...)
	if r.outcome == lease.OutcomeOK {
		lastSuccess = float64(r.end.UnixMilli()) / 1000
	}
	if lastSuccess > 0 {
		w.gauge(metricLastSuccess, "When a run of the lease on this host last ended with exit 0 (Unix time).", promFloat(lastSuccess), "name", r.name)
	}
	return w.b.Bytes()
}

// previousSuccess reads the last success of name from the file's previous
// version at path; 0 when there is none or it cannot be read.
func previousSuccess(path, name string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	prefix := metricLastSuccess + `{name="` + promLabel(name) + `"} `
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
				return f
			}
		}
	}
	return 0
}

// writeMetricsFile replaces path with the metrics of r, atomically: a
// temporary file in the same directory (named so that the textfile
// collector, which reads *.prom, ignores it), fsync, rename, fsync of the
// directory.
func writeMetricsFile(path string, r runReport) error {
	data := metricsText(r, previousSuccess(path, r.name))
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a rename: nothing there any more
	// Readable by the node_exporter's user, as a file made by `>` would be.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename itself; best effort, as the file is
		d.Close()
	}
	return nil
}

// checkMetricsFile refuses a --metrics-file whose directory does not exist,
// before anything starts: the file is written only at the run's end.
func checkMetricsFile(path string) error {
	if path == "" {
		return nil
	}
	if strings.HasSuffix(path, "/") {
		return usagef("--metrics-file %s: want a file's path, such as /var/lib/node_exporter/textfile_collector/JOB.prom", path)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return usagef("--metrics-file %s: the directory %s does not exist", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usagef("--metrics-file %s is a directory; want a file's path in it, such as %s", path, filepath.Join(path, "JOB.prom"))
	}
	return nil
}
