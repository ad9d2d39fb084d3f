package etcdlease_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
)

// TestSlotReleaseEnding: the lease of a slot (--slots) finds etcd's
// ending release through the slot wrapper (lease.As), and it gives the slot
// up and writes the run's end record under the lease's name in one write:
// the server's revision moves by one. Slot 1 is taken, whose key is not
// the lease's name. On an etcd of its own, so that no other test moves the
// revision.
func TestSlotReleaseEnding(t *testing.T) {
	t.Parallel()
	url := private(t, "single")["LEADERRUN_TEST_ETCD_URL"]
	raw, s := plain(t, url), open(t, url, etcdlease.Options{CallTimeout: 5 * time.Second})
	name := "slots-ending-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	take := func(label string) lease.Lease {
		t.Helper()
		a, err := lease.Acquire(ctxT(t), s, lease.Request{Name: name, Label: label, TTL: etcdlease.MinTTL, Slots: 2}, lease.AcquireOptions{Wait: 0})
		if err != nil {
			t.Fatalf("Acquire(%s): %v", label, err)
		}
		return a.Lease
	}
	_ = take("first")
	l := take("second")
	info := l.Info()
	if info.Slot != 1 {
		t.Fatalf("the second holder took slot %d; want 1", info.Slot)
	}
	er, ok := lease.As[lease.EndingRelease](l)
	if !ok {
		t.Fatal("the slot's lease does not pass on etcd's lease.EndingRelease")
	}
	start := lease.Run{Name: name, Label: "h:1", Token: info.Token, Start: time.Now().Add(-time.Second).UTC()}
	if err := s.RecordRun(ctxT(t), start, 0); err != nil {
		t.Fatalf("RecordRun(start): %v", err)
	}
	revision := func() int64 {
		t.Helper()
		gr, err := raw.Get(ctxT(t), etcdlease.DefaultPrefix+lease.SlotName(name, 1))
		if err != nil {
			t.Fatal(err)
		}
		return gr.Header.Revision
	}
	before := revision()
	end := start
	end.End, end.Outcome, end.ExitCode = time.Now().UTC(), lease.OutcomeOK, 0
	if err := er.ReleaseEnding(ctxT(t), end); err != nil {
		t.Fatalf("ReleaseEnding of slot 1: %v", err)
	}
	if after := revision(); after != before+1 {
		t.Errorf("the release with the end record moved the revision by %d; want one write", after-before)
	}
	gr, err := raw.Get(ctxT(t), etcdlease.DefaultPrefix+lease.SlotName(name, 1))
	if err != nil || len(gr.Kvs) != 0 {
		t.Errorf("slot 1's key after ReleaseEnding: %v, %v; want none", gr.Kvs, err)
	}
	runs, err := s.Runs(ctxT(t), name, 0)
	if err != nil || len(runs) != 1 || runs[0].Token != info.Token || !runs[0].Ended() {
		t.Fatalf("Runs(%s): %+v, %v; want the slot's run, ended", name, runs, err)
	}
}
