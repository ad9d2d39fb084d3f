package cmd

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func TestMetricsTextEscapesAndCarriesSuccess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.prom")
	start := time.Unix(1_700_000_000, 0)
	r := runReport{name: "a/b.c", holder: `web "1" \ x`, token: 7, start: start, end: start.Add(1500 * time.Millisecond), outcome: lease.OutcomeOK}
	if err := writeMetricsFile(path, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `holder="web \"1\" \\ x"`) {
		t.Errorf("holder label not escaped:\n%s", b)
	}
	if !strings.Contains(string(b), "leaderrun_last_run_duration_seconds{name=\"a/b.c\",holder=\"web \\\"1\\\" \\\\ x\"} 1.5\n") {
		t.Errorf("duration missing:\n%s", b)
	}
	// A failed run keeps the success of the file it replaces.
	r.outcome, r.code, r.end = lease.OutcomeFailed, 1, start.Add(time.Hour)
	if err := writeMetricsFile(path, r); err != nil {
		t.Fatal(err)
	}
	if got := previousSuccess(path, "a/b.c"); got != 1_700_000_001.5 {
		t.Errorf("last success after a failure: %v; want the earlier run's end", got)
	}
	if got := previousSuccess(path, "other"); got != 0 {
		t.Errorf("another lease's success: %v; want none", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v; want 0644 for the exporter's user", st.Mode().Perm())
	}
}

func TestHistoryFormat(t *testing.T) {
	for _, c := range []struct {
		format string
		json   bool
		want   string
		bad    bool
	}{{"", false, "text", false}, {"", true, "json", false}, {"prom", false, "prom", false},
		{"json", true, "json", false}, {"prom", true, "", true}, {"yaml", false, "", true}} {
		got, err := historyFormat(c.format, c.json)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("historyFormat(%q, %v) = %q, %v", c.format, c.json, got, err)
		}
	}
}

func TestPingOriginHidesTheKey(t *testing.T) {
	u, _ := url.Parse("https://user:pw@hc-ping.com:8443/ping/KEY/job?create=1")
	if got := pingOrigin(u); got != "https://hc-ping.com:8443" {
		t.Errorf("pingOrigin = %q", got)
	}
}

func TestPingBodyBounded(t *testing.T) {
	s := bounded(strings.Repeat("é", maxPingBody) + "\nsecond line")
	if len(s) > maxPingBody || strings.Contains(s, "\n") || !strings.HasPrefix(s, "é") || strings.ContainsRune(s, '\uFFFD') {
		t.Errorf("bounded: %d bytes, %q…", len(s), s[:10])
	}
}
