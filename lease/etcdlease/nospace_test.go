package etcdlease_test

import (
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
)

// TestNoSpaceIsBackPressure: an etcd server out of its space quota (a limit
// a real server reaches: --quota-backend-bytes below what its database
// already takes, so the first write raises the NOSPACE alarm) refuses every
// write. A waiter takes that as the store saying "no more": it keeps trying
// with growing, jittered back-off and reports the failure once (First), and
// gives up with ErrUnavailable when its wait is spent, never ErrConfig.
func TestNoSpaceIsBackPressure(t *testing.T) {
	t.Parallel()
	url := private(t, "single", "--quota-backend-bytes=1")["LEADERRUN_TEST_ETCD_URL"]
	s := open(t, url, etcdlease.Options{CallTimeout: time.Second})
	_, err := s.TryAcquire(ctxT(t), req("nospace", "a", 2*time.Second))
	if !errors.Is(err, lease.ErrUnavailable) || errors.Is(err, lease.ErrConfig) {
		t.Fatalf("TryAcquire on a full etcd: %v; want ErrUnavailable", err)
	}
	t.Log(err)
	var evs []lease.WaitEvent
	wait := 2 * time.Second
	start := time.Now()
	_, err = lease.Acquire(ctxT(t), s, req("nospace", "a", 2*time.Second), lease.AcquireOptions{
		Wait: wait, CallTimeout: time.Second, OnWait: func(ev lease.WaitEvent) { evs = append(evs, ev) },
	})
	took := time.Since(start)
	if !errors.Is(err, lease.ErrUnavailable) || errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Acquire on a full etcd: %v; want ErrUnavailable once the wait is spent", err)
	}
	firsts, slept := 0, time.Duration(0)
	for _, ev := range evs {
		if ev.Kind != lease.WaitStoreUnavailable || ev.RetryIn <= 0 {
			t.Fatalf("event %+v; want only store-unavailable events with a retry delay", ev)
		}
		if ev.First {
			firsts++
		}
		slept += ev.RetryIn
	}
	// Not a hot retry: the attempts are spaced by the back-off, which
	// fills most of the wait (each attempt takes a round trip only).
	if firsts != 1 || len(evs) < 2 || slept < took/2 {
		t.Fatalf("%d attempts in %v, %d reported as the first failure, %v of back-off; want one first report and back-off filling the wait",
			len(evs), took.Round(time.Millisecond), firsts, slept)
	}
	t.Logf("%d attempts in %v (wait %v), back-off %v", len(evs), took.Round(time.Millisecond), wait, slept)
}

// TestReleaseEndingOutOfSpace: etcd out of space (its NOSPACE alarm raised)
// refuses a transaction that puts a key but lets a delete through, so a
// release that carries the run's end record still releases: the next
// holder does not wait out the TTL, and the end is left to RecordRun.
func TestReleaseEndingOutOfSpace(t *testing.T) {
	t.Parallel()
	url := private(t, "single")["LEADERRUN_TEST_ETCD_URL"]
	raw, s := plain(t, url), open(t, url, etcdlease.Options{CallTimeout: time.Second})
	l, err := s.TryAcquire(ctxT(t), req("full", "a", 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	st, err := raw.Status(ctxT(t), raw.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = pb.NewMaintenanceClient(raw.ActiveConnection()).Alarm(ctxT(t), &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE})
	if err != nil {
		t.Fatal(err)
	}
	end := lease.Run{Name: "full", Label: "h:1", Token: l.Info().Token, Start: time.Now().Add(-time.Second).UTC(), End: time.Now().UTC(), Outcome: lease.OutcomeOK}
	if err := l.(lease.EndingRelease).ReleaseEnding(ctxT(t), end); err != nil {
		t.Fatalf("ReleaseEnding on a full etcd: %v; want the release alone to pass", err)
	}
	if gr, err := raw.Get(ctxT(t), etcdlease.DefaultPrefix+"full"); err != nil || len(gr.Kvs) != 0 {
		t.Fatalf("the key after ReleaseEnding on a full etcd: %v, %v; want it deleted", gr.Kvs, err)
	}
}
