package cmd

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
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
	// Runs whose child never starts keep the history trimmed: each also
	// writes a start, where the store trims (keep 2: a few runs more at most).
	for tok := uint64(100); tok < 120; tok++ {
		info.Token = tok
		notStarted(newRunRecord(store, 2, info, time.Second, log), newOutcome(126, slog.LevelWarn, "exec format error"))
	}
	if runs, err := store.Runs(ctx, "job", 0); err != nil || len(runs) > 2+2 || runs[0].Token != 119 || runs[0].Outcome != lease.OutcomeNotStarted {
		t.Fatalf("after 20 not-started runs keeping 2: %d runs (newest %+v), %v; want at most 4", len(runs), runs[0], err)
	}
	before, err := store.Runs(ctx, "job", 0)
	if err != nil {
		t.Fatal(err)
	}
	info.Token = 143
	off := newRunRecord(store, 0, info, time.Second, log)
	off.start()
	off.end(lease.OutcomeOK, 0, 0)
	if runs, err := store.Runs(ctx, "job", 0); err != nil || !reflect.DeepEqual(runs, before) {
		t.Fatalf("--history-keep 0 wrote: %+v, %v; want the history as before, %+v", runs, err, before)
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
		"check":   checkRunText(r, 0, now),
	} {
		if strings.ContainsAny(s, "\x1b\a\u202e") || !strings.Contains(s, `ok\x1b]0;title\x07`) || !strings.Contains(s, `SIG\x1b[2J`) || !strings.Contains(s, `h\u202eevil`) {
			t.Errorf("%s: %q; want the store's text escaped", what, s)
		}
	}
}

// check --ran-within 0s names the value it refuses, not a missing flag.
func TestCheckRanWithinZero(t *testing.T) {
	code, out, errOut := runCapture(t, "check", "--store", "file://"+t.TempDir(), "--ran-within", "0s", "job")
	if code != ExitFailure || out != "" || !strings.Contains(errOut, "--ran-within 0s: want a duration above zero") || strings.Contains(errOut, "needs") {
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

// A history that cannot be written (here NAME.runs is a directory) gets one
// warning a run, without -v, that says what it means for check and does not
// advise turning history off.
func TestHistoryNotWrittenWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "job.runs-"+strconv.Itoa(os.Geteuid())), 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rec := newRunRecord(store, 5, lease.Holder{Name: "job", Label: "h", Token: 41, Since: time.Now()}, time.Second, log)
	rec.start()
	rec.end(lease.OutcomeOK, 0, 0)
	out := buf.String()
	if strings.Count(out, "level=WARN") != 1 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "check may report MISSED for this run") || strings.Contains(out, "turns it off") {
		t.Fatalf("log:\n%s\nwant one warning that check may report MISSED", out)
	}
}

// endCounter counts the end records written through it.
type endCounter struct {
	lease.History
	ends int
	last lease.Run // the last end written
}

func (c *endCounter) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	if r.Ended() {
		c.ends++
		c.last = r
	}
	return c.History.RecordRun(ctx, r, keep)
}

// TestRunRecordEndWithRelease: a release carries the run's end only once
// the child started (its start record began); end does not write that end
// again, but does write an end whose outcome changed since (the release
// found the lease no longer ours).
func TestRunRecordEndWithRelease(t *testing.T) {
	store, err := filelease.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	info := lease.Holder{Name: "job", Label: "host-a:1", Token: 7, Since: time.Now()}
	rec := newRunRecord(store, 5, info, time.Second, slog.New(slog.DiscardHandler))
	c := &endCounter{History: store}
	rec.h = c
	if _, ok := rec.endForRelease(lease.OutcomeOK, 0, 0); ok {
		t.Fatal("endForRelease before the child started: want nothing to carry")
	}
	rec.start()
	run, ok := rec.endForRelease(lease.OutcomeOK, 0, 0)
	if !ok || !run.Ended() || run.Token != 7 || run.Outcome != lease.OutcomeOK {
		t.Fatalf("endForRelease = %+v, %v; want the run's end, ok", run, ok)
	}
	rec.endedWith(run) // the release wrote it
	rec.end(lease.OutcomeOK, 0, 0)
	if c.ends != 0 {
		t.Fatalf("end wrote %d end records after the release carried the same end; want 0", c.ends)
	}
	rec.end(lease.OutcomeLost, 124, 0)
	if c.ends != 1 || c.last.Outcome != lease.OutcomeLost || c.last.ExitCode != 124 || c.last.Token != 7 {
		t.Fatalf("after a changed outcome: %d end writes, the last %+v; want one, the run lost with 124", c.ends, c.last)
	}
}
