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

	"github.com/leaderrun/leaderrun/internal/run"
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
		{"not a period", nil, []string{"--once-per", "fortnight"}, `--once-per "fortnight": want hour, day, week or month, a cron schedule such as '0 21 * * *' or @daily, or a duration from 1s`},
		{"bad schedule", nil, []string{"--once-per", "0 25 * * *"}, `--once-per: not a period: "0 25 * * *": end of range (25) above maximum (23)`},
		{"schedule by variable", map[string]string{"LEADERRUN_ONCE_PER": "@every 1h"}, nil, `LEADERRUN_ONCE_PER (--once-per): not a period: "@every 1h": @every is not tied to the clock`},
		{"too short", nil, []string{"--once-per", "500ms"}, `--once-per "500ms": want`},
		{"no history", nil, []string{"--once-per", "day", "--history-keep", "0"}, "--once-per reads the run history, and --history-keep 0 records none"},
		{"no history by variable", map[string]string{"LEADERRUN_HISTORY_KEEP": "0", "LEADERRUN_ONCE_PER": "day"}, nil, "LEADERRUN_HISTORY_KEEP=0 (--history-keep) records none"},
		{"unknown zone", nil, []string{"--once-per", "day", "--once-per-zone", "Mars/Olympus"}, `--once-per-zone "Mars/Olympus": want an IANA time zone name`},
		{"zone with a duration", nil, []string{"--once-per", "6h", "--once-per-zone", "Europe/Berlin"}, "--once-per-zone Europe/Berlin applies to hour, day, week, month and cron schedules"},
		{"exit code", nil, []string{"--once-per", "day", "--once-per-exit-code", "300"}, "--once-per-exit-code 300: want 0-255"},
		{"within too short", nil, []string{"--once-within", "500ms"}, "--once-within 500ms: want a duration from 1s to 8784h"},
		{"within and per", nil, []string{"--once-within", "24h", "--once-per", "day"}, "--once-within with --once-per: give one of them"},
		{"within with a zone", nil, []string{"--once-within", "24h", "--once-per-zone", "Europe/Berlin"}, "--once-per-zone applies to --once-per's calendar periods"},
		{"within with a deadline", map[string]string{"LEADERRUN_ONCE_WITHIN": "24h", "LEADERRUN_ONCE_PER_DEADLINE": "1h"}, nil, "LEADERRUN_ONCE_PER_DEADLINE (--once-per-deadline) applies to --once-per's periods"},
		{"within without history", map[string]string{"LEADERRUN_ONCE_WITHIN": "24h", "LEADERRUN_HISTORY_KEEP": "0"}, nil, "LEADERRUN_ONCE_WITHIN (--once-within) reads the run history, and LEADERRUN_HISTORY_KEEP=0 (--history-keep) records none"},
		{"within with slots", nil, []string{"--once-within", "24h", "--slots", "2"}, "--slots 2 with --once-per or --once-within"},
		{"within not a duration", map[string]string{"LEADERRUN_ONCE_WITHIN": "tomorrow"}, nil, "tomorrow"},
		{"deadline alone", nil, []string{"--once-per-deadline", "2h"}, "--once-per-deadline needs --once-per PERIOD"},
		{"deadline not positive", nil, []string{"--once-per", "day", "--once-per-deadline", "0s"}, "--once-per-deadline 0s: want a positive duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"LEADERRUN_STORE": store}
			for k, v := range tc.vars {
				vars[k] = v
			}
			marker := filepath.Join(t.TempDir(), "ran")
			code, out, errOut := runEnv(t, vars, append(tc.args, "--name", "j", "--", "touch", marker)...)
			line := oneLineOf(t, errOut)
			if code != run.ExitFailure || !strings.Contains(line, tc.says) || out != "" {
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

// TestOncePerSchedule: --once-per with a cron schedule, in --once-per-zone,
// on the store's clock: a crontab that fires more often runs the job once
// per span between two fire times, and the fire time a spring-forward
// skips (02:30 on 2026-03-29 in Berlin) starts its period when the clock
// jumps, so that day's run is not lost. The child gets its period in
// LEADERRUN_PERIOD_START and LEADERRUN_PERIOD_END, in the zone.
func TestOncePerSchedule(t *testing.T) {
	s := &clockStore{historyStore{MemStore: &leasetest.MemStore{}}}
	useStore(t, "schedtest", s)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	marks := t.TempDir()
	for i, step := range []struct {
		at     string // the store's clock, in Berlin
		ran    bool
		says   string
		period string // the child's LEADERRUN_PERIOD_START and _END
	}{
		{"2026-03-28 01:50 +0100", true, "no successful run yet this period of '30 2 * * *' (2026-03-27 02:30 to 2026-03-28 02:30 CET, on the store's clock)", "2026-03-27T02:30:00+01:00 2026-03-28T02:30:00+01:00"},
		{"2026-03-28 02:10 +0100", false, "already done this period of '30 2 * * *' (2026-03-27 02:30 to 2026-03-28 02:30 CET", ""},
		{"2026-03-28 02:31 +0100", true, "(2026-03-28 02:30 to 2026-03-29 03:00 CEST", "2026-03-28T02:30:00+01:00 2026-03-29T03:00:00+02:00"},
		{"2026-03-29 01:59 +0100", false, "already done this period of '30 2 * * *' (2026-03-28 02:30 to 2026-03-29 03:00 CEST", ""},
		{"2026-03-29 03:01 +0200", true, "no successful run yet this period of '30 2 * * *' (2026-03-29 03:00 to 2026-03-30 02:30 CEST", "2026-03-29T03:00:00+02:00 2026-03-30T02:30:00+02:00"},
		{"2026-03-29 12:00 +0200", false, "already done", ""},
	} {
		at, err := time.ParseInLocation("2006-01-02 15:04 -0700", step.at, berlin)
		if err != nil {
			t.Fatal(err)
		}
		s.at.Store(at.UnixMicro())
		mark := filepath.Join(marks, strconv.Itoa(i))
		code, out, errOut := runCapture(t, "--store", "schedtest://", "--once-per", "30 2 * * *", "--once-per-zone", "Europe/Berlin", "--name", "d", "--",
			"sh", "-c", `touch "$0"; echo "$LEADERRUN_PERIOD_START $LEADERRUN_PERIOD_END"`, mark)
		_, statErr := os.Stat(mark)
		if code != 0 || (statErr == nil) != step.ran || !strings.Contains(errOut, step.says) {
			t.Fatalf("at %s: exit %d, ran %v; want ran %v saying %q:\n%s", step.at, code, statErr == nil, step.ran, step.says, errOut)
		}
		if want := step.period; strings.TrimSpace(out) != want {
			t.Errorf("at %s: the child's period %q; want %q", step.at, strings.TrimSpace(out), want)
		}
	}
}

// TestPeriodVarsNotInherited: a run without --once-per gives its child no
// period, not even one its own environment had (an outer leaderrun's, for
// another lease); a fixed period's is in UTC.
func TestPeriodVarsNotInherited(t *testing.T) {
	store := "file://" + t.TempDir()
	show := []string{"--", "sh", "-c", `echo "${LEADERRUN_PERIOD_START-unset} ${LEADERRUN_PERIOD_END-unset}"`}
	vars := map[string]string{"LEADERRUN_STORE": store, "LEADERRUN_PERIOD_START": "2001-01-01T00:00:00Z", "LEADERRUN_PERIOD_END": "2001-01-02T00:00:00Z"}
	if code, out, errOut := runEnv(t, vars, append([]string{"--name", "n"}, show...)...); code != 0 || out != "unset unset\n" {
		t.Fatalf("exit %d, the child saw %q; want unset unset: %s", code, out, errOut)
	}
	code, out, errOut := runEnv(t, vars, append([]string{"--name", "m", "--once-per", "8784h"}, show...)...)
	p, _ := lease.ParsePeriod("8784h", nil)
	start, end := p.Bounds(time.Now())
	// The period that held the acquisition: the one now, or the one
	// before it if a boundary passed since.
	want := start.UTC().Format(time.RFC3339) + " " + end.UTC().Format(time.RFC3339) + "\n"
	if ps, _ := p.Bounds(start.Add(-time.Nanosecond)); out != want && out != ps.UTC().Format(time.RFC3339)+" "+start.UTC().Format(time.RFC3339)+"\n" {
		t.Fatalf("exit %d, the child saw %q; want %q: %s", code, out, want, errOut)
	}
}

// TestOnceWithinAndDeadline, on the store's clock: --once-within 24h runs
// again only once a day has passed since the last successful run started,
// whatever the calendar says; --once-per day --once-per-deadline 2h runs a
// day's job until 02:00 only, then says it is too late, exiting as for a
// day done.
func TestOnceWithinAndDeadline(t *testing.T) {
	s := &clockStore{historyStore{MemStore: &leasetest.MemStore{}}}
	useStore(t, "withintest", s)
	marks := t.TempDir()
	base := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
	for i, step := range []struct {
		args  []string
		after time.Duration // the store's clock, after base
		code  int
		ran   bool
		says  string
	}{
		{[]string{"--name", "w", "--once-within", "24h"}, 0, 0, true, "no successful run yet within the last 24h (since 2026-11-24 22:00:00 UTC, on the store's clock)"},
		{[]string{"--name", "w", "--once-within", "24h"}, 23 * time.Hour, 0, false, "already done within the last 24h"},
		{[]string{"--name", "w", "--once-within", "24h"}, 24*time.Hour + time.Second, 0, true, "no successful run yet within the last 24h"},
		{[]string{"--name", "d", "--once-per", "day", "--once-per-deadline", "2h"}, 3 * time.Hour, 0, true, "no successful run yet this day (2026-11-26 00:00"},
		{[]string{"--name", "d", "--once-per", "day", "--once-per-deadline", "2h"}, 4 * time.Hour, 0, false, "already done this day"},
		{[]string{"--name", "d", "--once-per", "day", "--once-per-deadline", "2h", "--once-per-exit-code", "9"}, 28*time.Hour + time.Second, 9, false,
			"no successful run this day (2026-11-27 00:00 to 2026-11-28 00:00 UTC, on the store's clock), but it began 2h0m1s ago, past --once-per-deadline 2h: too late to run it; touch not started"},
	} {
		s.at.Store(base.Add(step.after).UnixMicro())
		mark := filepath.Join(marks, strconv.Itoa(i))
		code, _, errOut := runCapture(t, append(append([]string{"--store", "withintest://"}, step.args...), "--", "touch", mark)...)
		_, statErr := os.Stat(mark)
		if code != step.code || (statErr == nil) != step.ran || !strings.Contains(errOut, step.says) {
			t.Fatalf("step %d: exit %d, ran %v; want %d, ran %v, saying %q:\n%s", i, code, statErr == nil, step.code, step.ran, step.says, errOut)
		}
	}
}
