package run

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// A FIFO, or a link to a device, put at the metrics file's path after the
// run started is neither waited on nor read without end: the file is
// written as if there were no previous one, and replaces it.
func TestMetricsFileOverFIFOOrDevice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(path string) error
	}{
		{"fifo", func(p string) error { return unix.Mkfifo(p, 0o644) }},
		{"link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.prom")
			if err := tc.plant(path); err != nil {
				t.Fatal(err)
			}
			start := time.Unix(1_700_000_000, 0)
			r := runReport{name: "j", holder: "h", token: 1, start: start, end: start.Add(time.Second), outcome: lease.OutcomeFailed, code: 1}
			done := make(chan error, 1)
			go func() { done <- writeMetricsFile(path, r) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute): // a failure detector, not a wait: the write takes milliseconds
				// Unblock a reader stuck on the FIFO, so the goroutine ends.
				if f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				<-done
				t.Fatal("writing the metrics file blocked on what was at its path")
			}
			st, err := os.Lstat(path)
			if err != nil || !st.Mode().IsRegular() {
				t.Fatalf("after the write, %s is %v (%v); want a regular file", path, st.Mode(), err)
			}
			if b, _ := os.ReadFile(path); !strings.Contains(string(b), "leaderrun_last_run_exit_code") {
				t.Errorf("metrics file:\n%s", b)
			}
		})
	}
}
