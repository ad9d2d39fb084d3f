package run

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
	rec := newRunRecord(store, 5, info, testVersion, time.Second, log)
	rec.start()
	<-rec.started
	if runs, err := store.Runs(ctx, "job", 0); err != nil || len(runs) != 1 || runs[0].Ended() || runs[0].Version != testVersion {
		t.Fatalf("after the start: %+v, %v; want one run without an end", runs, err)
	}
	rec.end(lease.OutcomeStopped, 143, syscall.SIGTERM)
	runs, err := store.Runs(ctx, "job", 0)
	if err != nil || len(runs) != 1 || runs[0].Outcome != lease.OutcomeStopped || runs[0].ExitCode != 143 || runs[0].Signal != "SIGTERM" || !runs[0].Ended() {
		t.Fatalf("after the end: %+v, %v", runs, err)
	}
	info.Token = 42
	o := notStarted(newRunRecord(store, 5, info, testVersion, time.Second, log), newOutcome(130, slog.LevelWarn, "interrupted"))
	if o.Code != 130 {
		t.Fatalf("notStarted changed the outcome: %d", o.Code)
	}
	runs, err = store.Runs(ctx, "job", 0)
	if err != nil || len(runs) != 2 || runs[0].Token != 42 || runs[0].Outcome != lease.OutcomeNotStarted || runs[0].ExitCode != 130 {
		t.Fatalf("after a not-started run: %+v, %v", runs, err)
	}
	// Runs whose child never starts keep the history trimmed: each also
	// writes a start, where the store trims (keep 2: a few runs more at most).
	for tok := uint64(100); tok < 120; tok++ {
		info.Token = tok
		notStarted(newRunRecord(store, 2, info, testVersion, time.Second, log), newOutcome(126, slog.LevelWarn, "exec format error"))
	}
	if runs, err := store.Runs(ctx, "job", 0); err != nil || len(runs) > 2+2 || runs[0].Token != 119 || runs[0].Outcome != lease.OutcomeNotStarted {
		t.Fatalf("after 20 not-started runs keeping 2: %d runs (newest %+v), %v; want at most 4", len(runs), runs[0], err)
	}
	before, err := store.Runs(ctx, "job", 0)
	if err != nil {
		t.Fatal(err)
	}
	info.Token = 143
	off := newRunRecord(store, 0, info, testVersion, time.Second, log)
	off.start()
	off.end(lease.OutcomeOK, 0, 0)
	if runs, err := store.Runs(ctx, "job", 0); err != nil || !reflect.DeepEqual(runs, before) {
		t.Fatalf("--history-keep 0 wrote: %+v, %v; want the history as before, %+v", runs, err, before)
	}
}

// A history that cannot be written (here NAME.runs is a directory) gets one
// warning a run, without -v, that says what it means for check and does not
// advise turning history off.
func TestHistoryNotWrittenWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "job~runs-"+strconv.Itoa(os.Geteuid())), 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rec := newRunRecord(store, 5, lease.Holder{Name: "job", Label: "h", Token: 41, Since: time.Now()}, testVersion, time.Second, log)
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
	rec := newRunRecord(store, 5, info, testVersion, time.Second, slog.New(slog.DiscardHandler))
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

// testVersion is the version the tests' history records carry.
const testVersion = "v0.0.0-test"

// The end recorded is when the child exited (runner.Config.Exited), not
// when the record is written, after the sweep and the release.
func TestRunRecordEndsAtTheChildsExit(t *testing.T) {
	store, err := filelease.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rec := newRunRecord(store, 5, lease.Holder{Name: "job", Label: "h", Token: 41, Since: time.Now()}, testVersion, time.Second, slog.New(slog.DiscardHandler))
	rec.start()
	rec.exited()
	exited := rec.exitedAt
	rec.end(lease.OutcomeOK, 0, 0)
	runs, err := store.Runs(context.Background(), "job", 0)
	if err != nil || len(runs) != 1 || !runs[0].End.Equal(exited) {
		t.Fatalf("recorded %+v, %v; want one run ending at the child's exit, %v", runs, err, exited)
	}
}

// slowEnds is a History whose first fail end writes get no answer in time
// (context.DeadlineExceeded, as a call timeout gives) and are not stored.
type slowEnds struct {
	lease.History
	fail, tries int
}

func (s *slowEnds) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	if r.Ended() {
		if s.tries++; s.tries <= s.fail {
			return context.DeadlineExceeded
		}
	}
	return s.History.RecordRun(ctx, r, keep)
}

// With --once-per the run's end, written before the release, is what
// keeps the next holder from running COMMAND again in the period: a write
// the store answers too late is tried again while the lease is certainly
// ours (two fail, the third lands). One that never lands within that time
// is not taken as written, so the release carries it (endForRelease), and
// end writes it again after.
func TestRunRecordEndWhileHeldRetries(t *testing.T) {
	store, err := filelease.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, tc := range []struct {
		fail  int
		left  time.Duration
		wrote bool
	}{
		{fail: 2, left: 10 * time.Second, wrote: true},
		{fail: 1000, left: 0, wrote: false},
	} {
		info := lease.Holder{Name: "job" + strconv.Itoa(tc.fail), Label: "h", Token: 9, Since: time.Now()}
		rec := newRunRecord(store, 5, info, testVersion, time.Second, slog.New(slog.DiscardHandler))
		slow := &slowEnds{History: store, fail: tc.fail}
		rec.h = slow
		rec.start()
		rec.endWhileHeld(tc.left, lease.OutcomeOK, 0, 0)
		runs, err := store.Runs(context.Background(), info.Name, 0)
		if err != nil || len(runs) != 1 {
			t.Fatalf("fail %d: runs %+v, %v", tc.fail, runs, err)
		}
		if got := runs[0].Outcome == lease.OutcomeOK; got != tc.wrote || (rec.ended != nil) != tc.wrote {
			t.Fatalf("fail %d, %v left: after %d tries the record is %+v (ended %v); want the end written %v", tc.fail, tc.left, slow.tries, runs[0], rec.ended != nil, tc.wrote)
		}
		if !tc.wrote {
			if _, ok := rec.endForRelease(lease.OutcomeOK, 0, 0); !ok {
				t.Fatalf("an end not written: the release has nothing to carry; want the end")
			}
		}
	}
}
