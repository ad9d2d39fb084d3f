package cmd

import (
	"context"
	"os"
	"path/filepath"
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

// clockStore is a MemStore with a run history whose tokens count a clock
// of its own (lease.ClockTokens): the store's clock reads at, far from this
// host's, and moves one microsecond per acquisition.
type clockStore struct {
	*leasetest.MemStore
	at   atomic.Int64 // the store's clock, µs since the epoch
	mu   sync.Mutex
	runs []lease.Run
}

func (s *clockStore) TokensCountClock() {}

func (s *clockStore) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := s.MemStore.TryAcquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return clockLease{l, uint64(s.at.Add(1))}, nil
}

type clockLease struct {
	lease.Lease
	token uint64
}

func (l clockLease) Info() lease.Holder {
	h := l.Lease.Info()
	h.Token = l.token
	return h
}

func (s *clockStore) RecordRun(_ context.Context, r lease.Run, _ int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, r)
	return nil
}

func (s *clockStore) Runs(_ context.Context, name string, _ int) ([]lease.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return lease.NewestRuns(s.runs, lease.RunBounds{Name: name, Now: time.Now()}, 0), nil
}

// TestOncePerOnTheStoresClock: the period is the store's (its tokens'),
// whatever this host's clock says: with the store's clock on 2001-01-01,
// that is the day decided on, done after one run, and the next store day
// runs again.
func TestOncePerOnTheStoresClock(t *testing.T) {
	s := &clockStore{MemStore: &leasetest.MemStore{}}
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
