// Package promtext writes metrics in Prometheus' text exposition format:
// the files of --metrics-file (internal/run) and history --format prom
// (cmd).
package promtext

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Outcomes are the values of an outcome label: each is written, 1 (or a
// count) for the runs' and 0 for the others, so that a query need not know
// which series exist.
var Outcomes = []lease.Outcome{lease.OutcomeOK, lease.OutcomeFailed, lease.OutcomeLost,
	lease.OutcomeSteppedDown, lease.OutcomeStopped, lease.OutcomeNotStarted}

// Label escapes a label value as the text format wants it.
func Label(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// Float formats a sample value.
func Float(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Unix is a time as a Unix timestamp in seconds, milliseconds kept.
func Unix(t time.Time) string { return Float(float64(t.UnixMilli()) / 1000) }

// Writer writes metric families in the text format; the zero value is
// empty.
type Writer struct{ b bytes.Buffer }

// Bytes is what was written.
func (w *Writer) Bytes() []byte { return w.b.Bytes() }

// Family writes a family's HELP and TYPE lines.
func (w *Writer) Family(name, typ, help string) {
	fmt.Fprintf(&w.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// Sample writes one sample; labels alternate names and values.
func (w *Writer) Sample(name, value string, labels ...string) {
	w.b.WriteString(name)
	if len(labels) > 0 {
		w.b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.b.WriteByte(',')
			}
			fmt.Fprintf(&w.b, `%s="%s"`, labels[i], Label(labels[i+1]))
		}
		w.b.WriteByte('}')
	}
	w.b.WriteString(" " + value + "\n")
}

// Gauge writes a family of one sample.
func (w *Writer) Gauge(name, help, value string, labels ...string) {
	w.Family(name, "gauge", help)
	w.Sample(name, value, labels...)
}
