package cmd

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

// How a run reads in history, status and check: the span carries the date
// only when not today, and each outcome says its code and signal.
func TestRunTexts(t *testing.T) {
	utc := time.UTC
	now := time.Date(2026, 3, 10, 9, 0, 0, 0, utc)
	start := time.Date(2026, 3, 10, 2, 0, 3, 0, utc)
	end := time.Date(2026, 3, 10, 2, 4, 41, 0, utc)
	yesterday := start.AddDate(0, 0, -1)
	for _, tc := range []struct {
		name            string
		run             lease.Run
		running         bool
		span, res, last string
	}{
		{"ok today", lease.Run{Label: "host-b", Start: start, End: end, Outcome: lease.OutcomeOK},
			false, "02:00:03–02:04:41 UTC", "ok (exit 0)", "last run: host-b, 02:00:03–02:04:41 UTC, exit 0"},
		{"failed yesterday", lease.Run{Label: "host-a", Start: yesterday, End: yesterday.Add(time.Minute), Outcome: lease.OutcomeFailed, ExitCode: 3},
			false, "2026-03-09 02:00:03–02:01:03 UTC", "failed (exit 3)", "last run: host-a, 2026-03-09 02:00:03–02:01:03 UTC, failed (exit 3)"},
		{"across midnight", lease.Run{Label: "h", Start: yesterday, End: start, Outcome: lease.OutcomeLost, ExitCode: 124, Signal: "SIGTERM"},
			false, "2026-03-09 02:00:03–2026-03-10 02:00:03 UTC", "lost (exit 124, SIGTERM)", "last run: h, 2026-03-09 02:00:03–2026-03-10 02:00:03 UTC, lost (exit 124, SIGTERM)"},
		{"no end", lease.Run{Label: "h", Start: start},
			false, "02:00:03 UTC–", "no end recorded (leaderrun was killed, or is still running)", "last run: h, 02:00:03 UTC–, no end recorded"},
		{"running", lease.Run{Label: "h", Start: start}, true, "02:00:03 UTC–", "running", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runSpan(tc.run, now); got != tc.span {
				t.Errorf("runSpan = %q; want %q", got, tc.span)
			}
			if got := runResult(tc.run, tc.running); got != tc.res {
				t.Errorf("runResult = %q; want %q", got, tc.res)
			}
			if tc.last != "" {
				if got := lastRunText(tc.run, now); got != tc.last {
					t.Errorf("lastRunText = %q; want %q", got, tc.last)
				}
			}
		})
	}
}

// The history outcome of a child that ended by itself or by a forwarded
// signal.
func TestChildRunOutcome(t *testing.T) {
	for _, tc := range []struct {
		res     resultView
		stopped bool
		want    lease.Outcome
	}{
		{resultView{code: 0}, false, lease.OutcomeOK},
		{resultView{code: 3}, false, lease.OutcomeFailed},
		{resultView{code: 137, signal: 9}, false, lease.OutcomeFailed},
		{resultView{code: 143, signal: 15}, true, lease.OutcomeStopped},
		{resultView{code: 0}, true, lease.OutcomeStopped},
	} {
		if got := childRunOutcome(tc.res, tc.stopped); got != tc.want {
			t.Errorf("childRunOutcome(%+v, stopped %v) = %s; want %s", tc.res, tc.stopped, got, tc.want)
		}
	}
}

// Bad values of the history flags: exit 125, one line, nothing run.
func TestHistoryFlagsRefused(t *testing.T) {
	store := "file://" + t.TempDir()
	for _, args := range [][]string{
		{"--store", store, "--history-keep", "-1", "--", "true"},
		{"--store", store, "--history-keep", "10001", "--", "true"},
		{"history", "--store", store, "--limit", "-1", "job"},
		{"history", "--store", store, "--since", "-1h", "job"},
		{"check", "--store", store, "job"},
		{"check", "--store", store, "--ran-within", "0s", "job"},
		{"check", "--store", store, "--ran-within", "1h", "bad name"},
	} {
		code, out, errOut := runCapture(t, args...)
		if code != ExitFailure || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "usage: ") && !strings.Contains(errOut, "bad name") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 125 and one line", args, code, out, errOut)
		}
	}
}

// A run record on a real (file) store: the start is written while the
// child starts, the end replaces it; a not-started run is written whole;
// --history-keep 0 writes nothing.
func TestRunRecord(t *testing.T) {
	store, err := filelease.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	info := lease.Holder{Name: "job", Label: "host-a:1", Token: 41, Since: time.Now()}
	rec := newRunRecord(store, 5, info, time.Second, log)
	rec.start()
	<-rec.started
	if runs, err := store.Runs(ctx, "job", 0); err != nil || len(runs) != 1 || runs[0].Ended() || runs[0].Version != version() {
		t.Fatalf("after the start: %+v, %v; want one run without an end", runs, err)
	}
	rec.end(lease.OutcomeStopped, 143, syscall.SIGTERM)
	runs, err := store.Runs(ctx, "job", 0)
	if err != nil || len(runs) != 1 || runs[0].Outcome != lease.OutcomeStopped || runs[0].ExitCode != 143 || runs[0].Signal != "SIGTERM" || !runs[0].Ended() {
		t.Fatalf("after the end: %+v, %v", runs, err)
	}
	info.Token = 42
	o := notStarted(newRunRecord(store, 5, info, time.Second, log), newOutcome(130, slog.LevelWarn, "interrupted"))
	if o.code != 130 {
		t.Fatalf("notStarted changed the outcome: %d", o.code)
	}
	runs, err = store.Runs(ctx, "job", 0)
	if err != nil || len(runs) != 2 || runs[0].Token != 42 || runs[0].Outcome != lease.OutcomeNotStarted || runs[0].ExitCode != 130 {
		t.Fatalf("after a not-started run: %+v, %v", runs, err)
	}
	info.Token = 43
	off := newRunRecord(store, 0, info, time.Second, log)
	off.start()
	off.end(lease.OutcomeOK, 0, 0)
	if runs, err := store.Runs(ctx, "job", 0); err != nil || len(runs) != 2 {
		t.Fatalf("--history-keep 0 wrote: %+v, %v", runs, err)
	}
}
