package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestOncePerRefused(t *testing.T) {
	store := "file://" + t.TempDir()
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		says string
	}{
		{"not a period", nil, []string{"--once-per", "fortnight"}, `--once-per "fortnight": want hour, day, week or month, or a duration from 1s`},
		{"too short", nil, []string{"--once-per", "500ms"}, `--once-per "500ms": want`},
		{"no history", nil, []string{"--once-per", "day", "--history-keep", "0"}, "--once-per reads the run history, and --history-keep 0 records none"},
		{"no history by variable", map[string]string{"LEADERRUN_HISTORY_KEEP": "0", "LEADERRUN_ONCE_PER": "day"}, nil, "--history-keep 0 records none"},
		{"unknown zone", nil, []string{"--once-per", "day", "--once-per-zone", "Mars/Olympus"}, `--once-per-zone "Mars/Olympus": want an IANA time zone name`},
		{"zone with a duration", nil, []string{"--once-per", "6h", "--once-per-zone", "Europe/Berlin"}, "--once-per-zone Europe/Berlin applies to hour, day, week and month"},
		{"exit code", nil, []string{"--once-per", "day", "--once-per-exit-code", "300"}, "--once-per-exit-code 300: want 0-255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"LEADERRUN_STORE": store}
			for k, v := range tc.vars {
				vars[k] = v
			}
			marker := filepath.Join(t.TempDir(), "ran")
			code, out, errOut := runEnv(t, vars, append(tc.args, "--name", "j", "--", "touch", marker)...)
			line := oneLineOf(t, errOut)
			if code != ExitFailure || !strings.Contains(line, tc.says) || out != "" {
				t.Fatalf("exit %d, stderr %q; want 125 saying %q", code, errOut, tc.says)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child ran")
			}
		})
	}
}

// runsOf reads the run history of name in the file store dir.
func runsOf(t *testing.T, dir, name string) []lease.Run {
	t.Helper()
	s, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.Runs(context.Background(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestOncePerFileStore: in one period (a year long, so that no boundary
// falls between the runs), a failed run does not make the period done, a
// successful one does: later runs release the lease without starting
// COMMAND, record no run, and exit --once-per-exit-code (0 by default);
// --once-per-any counts the failed run.
func TestOncePerFileStore(t *testing.T) {
	dir := t.TempDir()
	marks := t.TempDir()
	p, _ := lease.ParsePeriod("8784h", nil)
	if _, end := p.Bounds(time.Now()); time.Until(end) < time.Minute {
		t.Skip("a period boundary is due within a minute")
	}
	vars := map[string]string{"LEADERRUN_STORE": "file://" + dir}
	run := func(mark string, code int, extra ...string) (int, string) {
		t.Helper()
		args := append([]string{"--once-per", "8784h", "--name", "job"}, extra...)
		args = append(args, "--", "sh", "-c", "touch \"$0\"; exit \"$1\"", filepath.Join(marks, mark), string(rune('0'+code)))
		c, _, errOut := runEnv(t, vars, args...)
		return c, errOut
	}
	ran := func(mark string) bool { _, err := os.Stat(filepath.Join(marks, mark)); return err == nil }

	if c, errOut := run("fail", 3); c != 3 || !ran("fail") {
		t.Fatalf("first run: exit %d, ran %v; want 3 and a run: %s", c, ran("fail"), errOut)
	}
	if c, errOut := run("any", 0, "--once-per-any"); c != 0 || ran("any") || !strings.Contains(errOut, "ended failed (exit 3)") {
		t.Fatalf("--once-per-any after a failed run: exit %d, ran %v; want 0 and no run: %s", c, ran("any"), errOut)
	}
	if c, errOut := run("ok", 0); c != 0 || !ran("ok") || !strings.Contains(errOut, "no successful run yet this 8784h period") {
		t.Fatalf("after a failed run: exit %d, ran %v; want a run: %s", c, ran("ok"), errOut)
	}
	c, errOut := run("again", 0)
	if c != 0 || ran("again") || !strings.Contains(errOut, "already done this 8784h period") || !strings.Contains(errOut, "sh not started") {
		t.Fatalf("after a successful run: exit %d, ran %v; want 0 and no run: %s", c, ran("again"), errOut)
	}
	if c, errOut := run("code", 0, "--once-per-exit-code", "9"); c != 9 || ran("code") {
		t.Fatalf("--once-per-exit-code 9: exit %d, ran %v: %s", c, ran("code"), errOut)
	}
	runs := runsOf(t, dir, "job")
	if len(runs) != 2 || runs[0].Outcome != lease.OutcomeOK || runs[1].Outcome != lease.OutcomeFailed {
		t.Fatalf("history %+v; want the failed run and the successful one, nothing for the runs not needed", runs)
	}
	if s, _ := filelease.Open(dir); s != nil {
		defer s.Close()
		if h, err := s.Status(context.Background(), "job"); err != nil || h != nil {
			t.Fatalf("status after a run not needed: %+v, %v; want the lease free", h, err)
		}
	}
}

// historyStore is a MemStore with a run history, whose acquisitions read
// a clock of its own, at (µs since the epoch), far from this host's.
type historyStore struct {
	*leasetest.MemStore
	at   atomic.Int64
	mu   sync.Mutex
	runs []lease.Run
}

func (s *historyStore) RecordRun(_ context.Context, r lease.Run, _ int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, r)
	return nil
}

func (s *historyStore) Runs(_ context.Context, name string, _ int) ([]lease.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return lease.NewestRuns(s.runs, lease.RunBounds{Name: name, Now: time.Now()}, 0), nil
}

// clockStore's tokens count its clock (lease.ClockTokens), which moves one
// microsecond per acquisition.
type clockStore struct{ historyStore }

func (s *clockStore) TokensCountClock() {}

func (s *clockStore) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := s.MemStore.TryAcquire(ctx, req)
	if err != nil {
		return nil, err
	}
	tok := uint64(s.at.Add(1))
	return stampedLease{l, func(h *lease.Holder) { h.Token = tok }}, nil
}

// sinceStore's tokens count acquisitions, as etcd's do; it reports each
// acquisition's time (Holder.Since) as at, as if this host's clock read at
// when the lease was granted.
type sinceStore struct{ historyStore }

func (s *sinceStore) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := s.MemStore.TryAcquire(ctx, req)
	if err != nil {
		return nil, err
	}
	since := time.UnixMicro(s.at.Load())
	return stampedLease{l, func(h *lease.Holder) { h.Since = since }}, nil
}

// stampedLease changes what Info reports.
type stampedLease struct {
	lease.Lease
	stamp func(*lease.Holder)
}

func (l stampedLease) Info() lease.Holder {
	h := l.Lease.Info()
	l.stamp(&h)
	return h
}

// TestOncePerDecidesOnTheAcquisition: on a store whose tokens do not count
// a clock, the period decided on is the one the lease was acquired in,
// which is also the start the history records; not the time the decision
// happens to be made, which can fall in the next period. Acquired at
// 23:59:59.999 on 2001-01-01 and decided in 2026, the run is 2001-01-01's;
// a second acquisition that day finds it done.
func TestOncePerDecidesOnTheAcquisition(t *testing.T) {
	s := &sinceStore{historyStore{MemStore: &leasetest.MemStore{}}}
	s.at.Store(time.Date(2001, 1, 1, 23, 59, 59, 999000000, time.UTC).UnixMicro())
	useStore(t, "sincetest", s)
	marks := t.TempDir()
	for i, want := range []string{"no successful run yet this day (2001-01-01 00:00 to 2001-01-02 00:00 UTC, on this host's clock)", "already done this day (2001-01-01 00:00 to 2001-01-02 00:00 UTC, on this host's clock)"} {
		mark := filepath.Join(marks, strconv.Itoa(i))
		code, _, errOut := runCapture(t, "--store", "sincetest://", "--once-per", "day", "--name", "d", "--", "touch", mark)
		_, err := os.Stat(mark)
		if code != 0 || (err == nil) != (i == 0) || !strings.Contains(errOut, want) {
			t.Fatalf("run %d: exit %d, ran %v: %s; want %q", i+1, code, err == nil, errOut, want)
		}
	}
	if runs, _ := s.Runs(context.Background(), "d", 0); len(runs) != 1 || !runs[0].Start.Equal(time.UnixMicro(s.at.Load())) {
		t.Fatalf("history %+v; want one run that started when the lease was acquired", runs)
	}
}

// TestOncePerOnTheStoresClock: the period is the store's (its tokens'),
// whatever this host's clock says: with the store's clock on 2001-01-01,
// that is the day decided on, done after one run, and the next store day
// runs again.
func TestOncePerOnTheStoresClock(t *testing.T) {
	s := &clockStore{historyStore{MemStore: &leasetest.MemStore{}}}
	s.at.Store(time.Date(2001, 1, 1, 23, 0, 0, 0, time.UTC).UnixMicro())
	useStore(t, "clocktest", s)
	marks := t.TempDir()
	run := func(mark string) (int, string) {
		code, _, errOut := runCapture(t, "--store", "clocktest://", "--once-per", "day", "--name", "d", "--", "touch", filepath.Join(marks, mark))
		return code, errOut
	}
	ran := func(mark string) bool { _, err := os.Stat(filepath.Join(marks, mark)); return err == nil }
	if code, errOut := run("1"); code != 0 || !ran("1") || !strings.Contains(errOut, "no successful run yet this day (2001-01-01 00:00 to 2001-01-02 00:00 UTC, on the store's clock)") {
		t.Fatalf("first run: exit %d, ran %v: %s", code, ran("1"), errOut)
	}
	if code, errOut := run("2"); code != 0 || ran("2") || !strings.Contains(errOut, "already done this day (2001-01-01 00:00 to 2001-01-02 00:00 UTC, on the store's clock)") {
		t.Fatalf("second run: exit %d, ran %v: %s", code, ran("2"), errOut)
	}
	s.at.Store(time.Date(2001, 1, 2, 0, 0, 1, 0, time.UTC).UnixMicro())
	if code, errOut := run("3"); code != 0 || !ran("3") || !strings.Contains(errOut, "this day (2001-01-02 00:00 to 2001-01-03 00:00 UTC") {
		t.Fatalf("the store's next day: exit %d, ran %v: %s", code, ran("3"), errOut)
	}
}

// A store that keeps no run history cannot decide: refused before any
// lease is taken.
func TestOncePerNeedsHistory(t *testing.T) {
	s := &leasetest.MemStore{}
	useStore(t, "nohistory", s)
	marker := filepath.Join(t.TempDir(), "ran")
	code, _, errOut := runCapture(t, "--store", "nohistory://", "--once-per", "day", "--name", "n", "--", "touch", marker)
	if code != ExitFailure || !strings.Contains(oneLineOf(t, errOut), "--once-per reads the run history, and this store keeps none") {
		t.Fatalf("exit %d, stderr %q; want 125 and one line", code, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran")
	}
	if h, _ := s.Status(context.Background(), "n"); h != nil {
		t.Fatalf("lease taken: %+v", h)
	}
}
