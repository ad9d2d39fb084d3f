package leasetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// testHistory checks a store's run history (lease.History), when it keeps
// one: a start record is visible as a run without an end, the end replaces
// it, every outcome reads back as written from another Store, runs come
// newest first, limit and the cap hold, and tokens near 2^53 stay exact.
// It is one scenario, long because each step reads what the steps before it
// wrote.
func testHistory(t *testing.T, h Harness) {
	w, r := open(t, h), open(t, h)
	hw, ok := w.(lease.History)
	if !ok {
		t.Skip("the store does not implement lease.History")
	}
	hr := r.(lease.History)
	nm := name(t)
	if runs, err := hr.Runs(ctxT(t), nm, 0); err != nil || len(runs) != 0 {
		t.Fatalf("Runs of a name without history = %v, %v; want none", runs, err)
	}
	base := uint64(1<<53 - 100) // exact in JSON and as a Redis score only if kept as integers
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
	// The cap keeps the newest tokens, whatever the order of the writes.
	const keep = 3
	late := run(8, lease.OutcomeOK, 0, "")
	if err := hw.RecordRun(ctxT(t), late, keep); err != nil {
		t.Fatalf("RecordRun(keep %d): %v", keep, err)
	}
	runs, err = hr.Runs(ctxT(t), nm, 0)
	if err != nil || len(runs) != keep || runs[0].Token != late.Token || runs[keep-1].Token != base+6 {
		t.Fatalf("Runs after a write keeping %d = %+v, %v; want tokens %d down to %d", keep, runs, err, late.Token, base+6)
	}
	old := run(1, lease.OutcomeOK, 0, "")
	if err := hw.RecordRun(ctxT(t), old, keep); err != nil {
		t.Fatalf("RecordRun(old token): %v", err)
	}
	runs, err = hr.Runs(ctxT(t), nm, 0)
	if err != nil || len(runs) != keep || runs[keep-1].Token != base+6 {
		t.Fatalf("Runs after an older token's write = %+v, %v; want it dropped by the cap", runs, err)
	}
	// Names are checked where they enter, not by the store (lease.Store).
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
