package leasetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// testHistory checks a store's run history (lease.History), when it keeps
// one: a start record is visible as a run without an end, the end replaces
// it, every outcome reads back as written from another Store, runs come
// newest first, limit and the cap hold, and tokens as large as the store
// mints (16 digits) stay exact.
// It is one scenario (testHistoryCap its last step): each step reads what
// the steps before it wrote. Names are checked where they enter, not by the
// store (lease.Store).
func testHistory(t *testing.T, h Harness) {
	w, r := open(t, h), open(t, h)
	var hw, hr lease.History = w, r
	nm := name(t)
	if runs, err := hr.Runs(ctxT(t), nm, 0); err != nil || len(runs) != 0 {
		t.Fatalf("Runs of a name without history = %v, %v; want none", runs, err)
	}
	base := realToken(t, w, h, nm) // 16 digits on the stores that mint tokens from their clock
	began := time.Now()
	start := began.Add(-time.Hour).UTC().Truncate(time.Microsecond)
	run := func(i int, o lease.Outcome, code int, sig string) lease.Run {
		r := lease.Run{Name: nm, Label: fmt.Sprintf("host-%d:4%d", i, i), Token: base + uint64(i),
			Start: start.Add(time.Duration(i) * time.Minute), Version: "v1.2.3"}
		if o != "" {
			r.End, r.Outcome, r.ExitCode, r.Signal = r.Start.Add(30*time.Second), o, code, sig
		}
		return r
	}
	// A start without an end: what a SIGKILLed leaderrun leaves.
	first := run(0, "", 0, "")
	if err := hw.RecordRun(ctxT(t), first, 0); err != nil {
		t.Fatalf("RecordRun(start): %v", err)
	}
	runs, err := hr.Runs(ctxT(t), nm, 0)
	if err != nil || len(runs) != 1 || !sameRun(runs[0], first, began) || runs[0].Ended() {
		t.Fatalf("Runs after a start = %+v, %v; want %+v without an end", runs, err, first)
	}
	want := []lease.Run{
		run(0, lease.OutcomeOK, 0, ""),
		run(1, lease.OutcomeFailed, 3, ""),
		run(2, lease.OutcomeFailed, 137, "SIGKILL"),
		run(3, lease.OutcomeLost, 124, ""),
		run(4, lease.OutcomeSteppedDown, 123, ""),
		run(5, lease.OutcomeStopped, 143, "SIGTERM"),
		run(6, lease.OutcomeNotStarted, 0, ""),
		run(7, "", 0, ""),
	}
	for _, x := range want {
		if err := hw.RecordRun(ctxT(t), x, 0); err != nil {
			t.Fatalf("RecordRun(%+v): %v", x, err)
		}
	}
	runs, err = hr.Runs(ctxT(t), nm, 0)
	if err != nil || len(runs) != len(want) {
		t.Fatalf("Runs = %d runs, %v; want %d (the start of token %d replaced by its end)", len(runs), err, len(want), first.Token)
	}
	for i, got := range runs {
		if x := want[len(want)-1-i]; !sameRun(got, x, began) {
			t.Errorf("run %d = %+v; want %+v (newest first)", i, got, x)
		}
	}
	if runs, err := hr.Runs(ctxT(t), nm, 2); err != nil || len(runs) != 2 || runs[0].Token != base+7 || runs[1].Token != base+6 {
		t.Fatalf("Runs(limit 2) = %+v, %v; want tokens %d, %d", runs, err, base+7, base+6)
	}
	testHistoryCap(t, h, hw, hr, nm, base, run)
}

// testHistoryCap is testHistory's last step, on the runs it recorded (tokens
// base up to base+7, made by run): the cap keeps the newest tokens, whatever
// the order of the writes.
func testHistoryCap(t *testing.T, h Harness, hw, hr lease.History, nm string, base uint64, run func(int, lease.Outcome, int, string) lease.Run) {
	t.Helper()
	// A run's start and end, keeping 3.
	const keep = 3
	late := run(8, lease.OutcomeOK, 0, "")
	for _, x := range []lease.Run{run(8, "", 0, ""), late} {
		if err := hw.RecordRun(ctxT(t), x, keep); err != nil {
			t.Fatalf("RecordRun(keep %d): %v", keep, err)
		}
	}
	runs, err := hr.Runs(ctxT(t), nm, 0)
	if err != nil || len(runs) != keep || runs[0].Token != late.Token || !runs[0].Ended() || runs[keep-1].Token != base+6 {
		t.Fatalf("Runs after a run keeping %d = %+v, %v; want tokens %d down to %d", keep, runs, err, late.Token, base+6)
	}
	old := run(1, lease.OutcomeOK, 0, "")
	if err := hw.RecordRun(ctxT(t), old, keep); err != nil {
		t.Fatalf("RecordRun(old token): %v", err)
	}
	runs, err = hr.Runs(ctxT(t), nm, 0)
	if h.TrimsAtStart && len(runs) > keep {
		runs = runs[:keep] // the old token's end lies beyond them until the next start
	}
	if err != nil || len(runs) != keep || runs[keep-1].Token != base+6 {
		t.Fatalf("Runs after an older token's write = %+v, %v; want it dropped by the cap", runs, err)
	}
}

// sameRun compares two runs field by field, times with Equal. A store may
// put its own clock's reading at the write in place of the end written (the
// time the run ended as the store saw it): an end from since (when the test
// began) to now, a second either way for the clocks of one machine, is
// accepted too.
func sameRun(got, want lease.Run, since time.Time) bool {
	end := got.End.Equal(want.End) ||
		want.Ended() && !got.End.Before(since.Add(-time.Second)) && !got.End.After(time.Now().Add(time.Second))
	return got.Name == want.Name && got.Label == want.Label && got.Token == want.Token && got.Start.Equal(want.Start) && end &&
		got.Outcome == want.Outcome && got.ExitCode == want.ExitCode && got.Signal == want.Signal && got.Version == want.Version
}

// realToken takes and releases the lease name once, and returns its token:
// the tokens of the records the tests write count up from it, as real runs'
// would (a store may refuse a record whose token it cannot have minted yet).
func realToken(t *testing.T, s lease.Store, h Harness, nm string) uint64 {
	t.Helper()
	l := mustAcquire(t, s, heldReq(nm, "token-source", h))
	tok := l.Info().Token
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return tok
}

// testHistoryNotEvicted checks that what is not a valid run record never
// displaces one: records written through RecordRun with a start in the
// future or a token the store cannot have minted yet (forged, or a clock set
// years ahead) are not runs; with PutRunEntry, entries that are not JSON,
// another lease's records and records with tokens from the future placed
// above the real runs are not either; none of them counts towards keep, so
// the trim of the next real run keeps the real runs, and its own. A keep
// found in the history (a forger's "keep":1) is not obeyed.
func testHistoryNotEvicted(t *testing.T, h Harness) {
	s := open(t, h)
	var hs lease.History = s
	nm := name(t)
	base := realToken(t, s, h, nm)
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	run := func(i int) lease.Run {
		st := start.Add(time.Duration(i) * time.Minute)
		return lease.Run{Name: nm, Label: fmt.Sprintf("host-%d", i), Token: base + uint64(i), Start: st,
			End: st.Add(time.Second), Outcome: lease.OutcomeOK, Version: "v1"}
	}
	const keep = 5
	for i := range keep {
		if err := hs.RecordRun(ctxT(t), run(i), keep); err != nil {
			t.Fatalf("RecordRun(%d): %v", i, err)
		}
	}
	tokens := func(limit int) []uint64 { return runTokens(t, hs, nm, base, limit) }
	// Through the store's own API: the future, in time and in tokens.
	recordFuture(t, hs, keep, run)
	if got := tokens(0); !slices.Equal(got, []uint64{4, 3, 2, 1, 0}) {
		t.Fatalf("runs (as token - %d) after records from the future = %v; want the real 4 down to 0", base, got)
	}
	if h.PutRunEntry != nil {
		putNotRuns(t, h, nm, base, run)
		// A valid record (the store cannot tell it from a real one) that
		// carries a keep of 1: it is a run, but trims nothing.
		b, _ := json.Marshal(run(5))
		h.PutRunEntry(t, nm, base+5, append(b[:len(b)-1], []byte(`,"keep":1}`)...))
		if got := tokens(0); !slices.Equal(got, []uint64{5, 4, 3, 2, 1, 0}) {
			t.Fatalf("runs (as token - %d) after entries that are not runs = %v; want 5 down to 0", base, got)
		}
		if got := tokens(2); !slices.Equal(got, []uint64{5, 4}) {
			t.Fatalf("2 runs (as token - %d) under entries that are not runs = %v; want 5, 4", base, got)
		}
	}
	// The next real run: its start, then its end, each trimming to keep.
	next := run(6)
	next.End, next.Outcome = time.Time{}, ""
	if err := hs.RecordRun(ctxT(t), next, keep); err != nil {
		t.Fatalf("RecordRun(start): %v", err)
	}
	if err := hs.RecordRun(ctxT(t), run(6), keep); err != nil {
		t.Fatalf("RecordRun(end): %v", err)
	}
	want := []uint64{6, 4, 3, 2, 1}
	if h.PutRunEntry != nil {
		want = []uint64{6, 5, 4, 3, 2}
	}
	runs, err := hs.Runs(ctxT(t), nm, 0)
	if err != nil || len(runs) != len(want) || !runs[0].Ended() {
		t.Fatalf("after the next run, Runs = %+v, %v; want tokens %v (as token - %d), the first with its end", runs, err, want, base)
	}
	if got := tokens(0); !slices.Equal(got, want) {
		t.Fatalf("runs (as token - %d) after the next run = %v; want %v: the newest valid records, its own included", base, got, want)
	}
}

// runTokens lists the tokens of nm's runs, newest first, as token - base.
func runTokens(t *testing.T, hs lease.History, nm string, base uint64, limit int) []uint64 {
	t.Helper()
	runs, err := hs.Runs(ctxT(t), nm, limit)
	if err != nil {
		t.Fatalf("Runs: %v", err)
	}
	var out []uint64
	for _, r := range runs {
		out = append(out, r.Token-base)
	}
	return out
}

// putNotRuns writes, with h.PutRunEntry, entries into nm's history that are
// not its runs: 30 that are not JSON, 10 records of another lease, and 20
// records (made by run) with tokens from the future, placed above the real
// runs.
func putNotRuns(t *testing.T, h Harness, nm string, base uint64, run func(int) lease.Run) {
	t.Helper()
	for i := range 30 {
		h.PutRunEntry(t, nm, base+uint64(20+i), []byte(fmt.Sprintf("junk %d \x1b]0;title\x07", i)))
	}
	for i := range 10 {
		other := run(60 + i)
		other.Name = nm + "-other"
		b, _ := json.Marshal(other)
		h.PutRunEntry(t, nm, other.Token, b)
	}
	for i := range 20 {
		high := run(0)
		high.Token = 1<<53 - 1000 - uint64(i)
		b, _ := json.Marshal(high)
		h.PutRunEntry(t, nm, high.Token, b)
	}
}

// recordFuture records, through the store's own API, runs (made by run) from
// the future: one that starts in 2099, three with tokens near 2^53.
func recordFuture(t *testing.T, hs lease.History, keep int, run func(int) lease.Run) {
	t.Helper()
	future := run(90)
	future.Start, future.End = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2099, 1, 1, 0, 1, 0, 0, time.UTC)
	if err := hs.RecordRun(ctxT(t), future, keep); err != nil {
		t.Fatalf("RecordRun(a start in 2099): %v", err)
	}
	for i := range 3 {
		high := run(100 + i)
		high.Token = 1<<53 - 1 - uint64(i)
		if err := hs.RecordRun(ctxT(t), high, keep); err != nil {
			t.Fatalf("RecordRun(token near 2^53): %v", err)
		}
	}
}
