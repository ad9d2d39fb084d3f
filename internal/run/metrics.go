package run

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/promtext"
	"github.com/leaderrun/leaderrun/internal/safefile"
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

// metricLastSuccess is carried over from the file's previous version while
// the runs since have failed.
const metricLastSuccess = "leaderrun_last_success_timestamp_seconds"

// metricsText is the file's content for the run r; lastSuccess is the
// previous file's last success (zero: none known), used when r failed.
func metricsText(r runReport, lastSuccess float64) []byte {
	var w promtext.Writer
	l := []string{"name", r.name, "holder", r.holder}
	w.Gauge("leaderrun_last_run_start_timestamp_seconds", "When the last run on this host started its command (Unix time).", promtext.Unix(r.start), l...)
	w.Gauge("leaderrun_last_run_end_timestamp_seconds", "When the last run on this host ended (Unix time).", promtext.Unix(r.end), l...)
	w.Gauge("leaderrun_last_run_duration_seconds", "How long the last run on this host took, from the command's start to its end.", promtext.Float(r.end.Sub(r.start).Seconds()), l...)
	w.Gauge("leaderrun_last_run_exit_code", "leaderrun's exit code for the last run on this host (the command's own, 128+N for signal N, 123 stepped down, 124 lost).", strconv.Itoa(r.code), l...)
	w.Family("leaderrun_last_run_outcome", "gauge", "How the last run on this host ended: 1 for its outcome, 0 for the others.")
	for _, o := range promtext.Outcomes {
		v := "0"
		if o == r.outcome {
			v = "1"
		}
		w.Sample("leaderrun_last_run_outcome", v, append(l, "outcome", string(o))...)
	}
	w.Gauge("leaderrun_last_run_fencing_token", "The fencing token of the last run on this host.", strconv.FormatUint(r.token, 10), l...)
	w.Gauge("leaderrun_last_run_renewals_failed", "Lease renewals of the last run on this host that failed and were retried.", strconv.Itoa(r.renewalsFailed), l...)
	w.Gauge("leaderrun_last_run_lease_wait_seconds", "How long the last run on this host waited for the lease.", promtext.Float(r.waited.Seconds()), l...)
	if r.outcome == lease.OutcomeOK {
		lastSuccess = float64(r.end.UnixMilli()) / 1000
	}
	if lastSuccess > 0 {
		w.Gauge(metricLastSuccess, "When a run of the lease on this host last ended with exit 0 (Unix time).", promtext.Float(lastSuccess), "name", r.name)
	}
	return w.Bytes()
}

// previousSuccess reads the last success of name from the file's previous
// version at path; 0 when there is none or it cannot be read.
func previousSuccess(path, name string) float64 {
	// Not os.ReadFile: a FIFO put there would block leaderrun for good
	// after the child ran, and a link to /dev/zero grow it without end.
	b, err := safefile.Read(path)
	if err != nil {
		return 0
	}
	prefix := metricLastSuccess + `{name="` + promtext.Label(name) + `"} `
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

// CheckMetricsFile refuses a --metrics-file whose directory does not exist,
// before anything starts: the file is written only at the run's end.
// spell names the flag (nil: lease.DashFlag).
func CheckMetricsFile(path string, spell lease.FlagSpeller) error {
	if path == "" {
		return nil
	}
	if spell == nil {
		spell = lease.DashFlag
	}
	what := spell("metrics-file", path)
	if strings.HasSuffix(path, "/") {
		return usagef("%s: want a file's path, such as /var/lib/node_exporter/textfile_collector/JOB.prom", what)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return usagef("%s: the directory %s does not exist", what, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usagef("%s is a directory; want a file's path in it, such as %s", what, filepath.Join(path, "JOB.prom"))
	} else if err == nil && !st.Mode().IsRegular() {
		return usagef("%s is not a regular file (a named pipe, a device or a socket, or a link to one); want the path of a regular file or of none yet", what)
	}
	return nil
}
