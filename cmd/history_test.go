package cmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/run"
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
			false, "02:00:03 UTC–", "no end recorded (leaderrun was killed, could not write the end to the store, or is still running)", "last run: h, 02:00:03 UTC–, no end recorded"},
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
		if code != run.ExitFailure || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "usage: ") && !strings.Contains(errOut, "bad name") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 125 and one line", args, code, out, errOut)
		}
	}
}

// Outcome and signal come from the store: what a terminal would interpret
// is escaped in history's line, status's last run and check's line.
func TestRunTextsEscaped(t *testing.T) {
	now := time.Now()
	r := lease.Run{Label: "h\u202eevil", Start: now.Add(-time.Minute), End: now, Outcome: "ok\x1b]0;title\a", ExitCode: 1, Signal: "SIG\x1b[2J"}
	for what, s := range map[string]string{
		"history": runLine(r, false, now),
		"status":  lastRunText(r, now),
		"check":   checkRunText(r, nil, now),
	} {
		if strings.ContainsAny(s, "\x1b\a\u202e") || !strings.Contains(s, `ok\x1b]0;title\x07`) || !strings.Contains(s, `SIG\x1b[2J`) || !strings.Contains(s, `h\u202eevil`) {
			t.Errorf("%s: %q; want the store's text escaped", what, s)
		}
	}
}

// check --ran-within 0s names the value it refuses, not a missing flag.
func TestCheckRanWithinZero(t *testing.T) {
	code, out, errOut := runCapture(t, "check", "--store", "file://"+t.TempDir(), "--ran-within", "0s", "job")
	if code != run.ExitFailure || out != "" || !strings.Contains(errOut, "--ran-within 0s: want a duration above zero") || strings.Contains(errOut, "needs") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 125 and the value refused", code, out, errOut)
	}
}

// A run without an end has no exit code: null in history --json and in
// check --json, 0 once the end is written.
func TestNoEndNoExitCode(t *testing.T) {
	dir := t.TempDir()
	store, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r := lease.Run{Name: "job", Label: "h", Token: uint64(time.Now().Add(-time.Minute).UnixMicro()), Start: time.Now().Add(-time.Minute).UTC()}
	if err := store.RecordRun(context.Background(), r, 0); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"history", "--store", "file://" + dir, "--json", "job"},
		{"check", "--store", "file://" + dir, "--json", "--ran-within", "1h", "job"},
	} {
		code, out, errOut := runCapture(t, args...)
		if code != 0 || !strings.Contains(out, `"exit_code":null`) || strings.Contains(out, `"exit_code":0`) {
			t.Errorf("%v: exit %d, stdout %s, stderr %s; want exit_code null", args, code, out, errOut)
		}
	}
	r.End, r.Outcome = time.Now().UTC(), lease.OutcomeOK
	if err := store.RecordRun(context.Background(), r, 0); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCapture(t, "history", "--store", "file://"+dir, "--json", "job"); code != 0 || !strings.Contains(out, `"exit_code":0`) {
		t.Errorf("after the end: exit %d, stdout %s; want exit_code 0", code, out)
	}
}

// A record that starts in 2099 is no run: check says MISSED, not "started
// 0s ago", and history does not show it.
func TestCheckFutureStart(t *testing.T) {
	dir := t.TempDir()
	store, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	start := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	r := lease.Run{Name: "job", Label: "h", Token: 42, Start: start, End: start.Add(time.Minute), Outcome: lease.OutcomeOK}
	if err := store.RecordRun(context.Background(), r, 0); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCapture(t, "check", "--store", "file://"+dir, "--ran-within", "1h", "--succeeded", "job"); code != ExitCheckMissed || !strings.HasPrefix(out, "MISSED") {
		t.Errorf("check: exit %d, stdout %q, stderr %q; want MISSED (2)", code, out, errOut)
	}
	if code, out, _ := runCapture(t, "history", "--store", "file://"+dir, "job"); code != 0 || strings.Contains(out, "2099") {
		t.Errorf("history: exit %d, stdout %q; want no run", code, out)
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
