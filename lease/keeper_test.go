package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// keeperRig holds a fake store on a fake clock and one acquired lease.
type keeperRig struct {
	clock *leasetest.FakeClock
	store *leasetest.MemStore
	l     lease.Lease
	cfg   lease.KeeperConfig
}

func newRig(t *testing.T) *keeperRig {
	t.Helper()
	clock := &leasetest.FakeClock{}
	clock.Advance(time.Hour) // an arbitrary, non-zero origin
	store := &leasetest.MemStore{Clock: clock, Epsilon: 5 * time.Millisecond}
	tm, err := lease.Timing{TTL: 3 * time.Second, Grace: 500 * time.Millisecond, Explicit: struct{ RenewEvery, Grace, CallTimeout bool }{Grace: true}}.Resolve(store.Limits())
	if err != nil {
		t.Fatal(err)
	}
	tm.CallTimeout = time.Hour // real-time bound; the fake clock drives everything else
	l, err := store.TryAcquire(context.Background(), lease.Request{Name: "job", Label: "me", ID: lease.NewID(), TTL: tm.TTL})
	if err != nil {
		t.Fatal(err)
	}
	return &keeperRig{clock: clock, store: store, l: l, cfg: lease.KeeperConfig{Timing: tm, Limits: store.Limits(), Clock: clock}}
}

func (r *keeperRig) keep(t *testing.T, sentAt time.Duration) *lease.Keeper {
	t.Helper()
	k, err := lease.Keep(context.Background(), r.l, sentAt, r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k
}

// settle waits until n goroutines sleep on the fake clock: the code under test
// has reacted to the last Advance.
func (r *keeperRig) settle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.clock.Sleepers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d sleepers (have %d)", n, r.clock.Sleepers())
		}
		time.Sleep(50 * time.Microsecond) // polling a counter, not synchronising on time
	}
}

func (r *keeperRig) validity() time.Duration { return r.cfg.Timing.Validity(r.cfg.Limits) }
func (r *keeperRig) stopLead() time.Duration { return r.cfg.Timing.StopLead() }

func TestKeeperDeadlineFromSendTime(t *testing.T) {
	r := newRig(t)
	sent := r.clock.Now()
	// The renew takes 400ms to answer: E must count from when it was sent.
	var renewSentAt atomic.Int64
	r.store.OnRenew = func(ctx context.Context, id string) error {
		renewSentAt.Store(int64(r.clock.Now()))
		r.clock.Advance(400 * time.Millisecond)
		return nil
	}
	k := r.keep(t, sent)
	if e, ok := k.ValidUntil(); !ok || e != sent+r.validity() {
		t.Fatalf("ValidUntil = %v, %v; want send time + L(1−ρ) − ε = %v", e, ok, sent+r.validity())
	}
	r.settle(t, 2) // renew loop and watchdog asleep
	r.clock.Advance(r.cfg.Timing.RenewEvery)
	r.settle(t, 2)
	ts := time.Duration(renewSentAt.Load())
	if ts != sent+r.cfg.Timing.RenewEvery {
		t.Fatalf("renew sent at %v; want %v", ts-sent, r.cfg.Timing.RenewEvery)
	}
	if e, _ := k.ValidUntil(); e != ts+r.validity() {
		t.Fatalf("after a slow renew ValidUntil = +%v; want renew send time + validity = +%v (not the answer time)", e-sent, ts+r.validity()-sent)
	}
	if k.Context().Err() != nil {
		t.Fatalf("keeper stopped after a successful renew: %v", context.Cause(k.Context()))
	}
}

func TestKeeperStopsAtDeadlineWhileRenewHangs(t *testing.T) {
	r := newRig(t)
	sent := r.clock.Now()
	hung := make(chan struct{}, 16)
	never := make(chan struct{})
	r.store.OnRenew = func(ctx context.Context, id string) error {
		hung <- struct{}{}
		<-never // a client that ignores its deadline: only the watchdog can act
		return errors.New("released by cleanup")
	}
	k := r.keep(t, sent)
	t.Cleanup(func() { close(never) }) // runs before k.Stop (cleanups are LIFO)
	r.settle(t, 2)
	r.clock.Advance(r.cfg.Timing.RenewEvery)
	<-hung
	r.settle(t, 1) // only the watchdog sleeps; the renew loop is stuck in the call
	e := sent + r.validity()
	stopAt := e - r.stopLead()
	r.clock.Advance(stopAt - r.clock.Now() - time.Millisecond)
	r.settle(t, 1)
	if err := k.Context().Err(); err != nil {
		t.Fatalf("stopped %v before E−K−G: %v", time.Millisecond, context.Cause(k.Context()))
	}
	r.clock.Advance(time.Millisecond)
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("keeper did not stop at E−K−G while a renew call hung")
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause = %v; want ErrLost", cause)
	}
	if r.clock.Now() != stopAt {
		t.Fatalf("stopped at +%v; want E−K−G = +%v", r.clock.Now()-sent, stopAt-sent)
	}
	// SIGKILL time: E−K exactly, on the same clock.
	killAt := e - r.cfg.Timing.KillBound
	r.settle(t, 1)
	r.clock.Advance(killAt - r.clock.Now() - time.Millisecond)
	r.settle(t, 1)
	select {
	case <-k.KillC():
		t.Fatalf("KillC closed %v before E−K", time.Millisecond)
	default:
	}
	r.clock.Advance(time.Millisecond)
	select {
	case <-k.KillC():
	case <-time.After(10 * time.Second):
		t.Fatal("KillC not closed at E−K")
	}
}

func TestKeeperLostStopsAtOnce(t *testing.T) {
	r := newRig(t)
	sent := r.clock.Now()
	k := r.keep(t, sent)
	r.settle(t, 2)
	r.store.Break("job") // someone deleted the lease
	r.clock.Advance(r.cfg.Timing.RenewEvery)
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("keeper did not stop on a lost answer")
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Fatalf("cause = %v; want ErrLost", cause)
	}
	if got := r.clock.Now() - sent; got != r.cfg.Timing.RenewEvery {
		t.Fatalf("stopped at +%v; want at the first renew (+%v), not at the deadline", got, r.cfg.Timing.RenewEvery)
	}
}

func TestKeeperRetriesTransientErrors(t *testing.T) {
	r := newRig(t)
	sent := r.clock.Now()
	var calls atomic.Int32
	r.store.OnRenew = func(ctx context.Context, id string) error {
		if calls.Add(1) <= 2 {
			return lease.ErrUnavailable
		}
		return nil
	}
	k := r.keep(t, sent)
	for calls.Load() < 3 {
		r.settle(t, 2)
		r.clock.Advance(50 * time.Millisecond)
		if r.clock.Now()-sent > r.validity() {
			t.Fatal("no successful retry before the deadline")
		}
	}
	r.settle(t, 2)
	e, _ := k.ValidUntil()
	if e <= sent+r.validity() {
		t.Fatalf("E did not move after the retry succeeded")
	}
	if got := r.clock.Now() - sent; got >= 2*r.cfg.Timing.RenewEvery {
		t.Fatalf("retries took until +%v; want quick retries well before the next scheduled renewal", got)
	}
	if k.Context().Err() != nil {
		t.Fatalf("keeper stopped: %v", context.Cause(k.Context()))
	}
}

func TestKeeperLateAnswerCountsAsFailure(t *testing.T) {
	r := newRig(t)
	sent := r.clock.Now()
	r.store.OnRenew = func(ctx context.Context, id string) error {
		// The answer arrives after the stop point: it must not extend E.
		r.clock.Advance(r.validity())
		return nil
	}
	k := r.keep(t, sent)
	r.settle(t, 2)
	r.clock.Advance(r.cfg.Timing.RenewEvery)
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a late successful renew kept the child running")
	}
	if e, _ := k.ValidUntil(); e != sent+r.validity() {
		t.Fatalf("a late answer moved E by %v", e-(sent+r.validity()))
	}
}

func TestKeepRenewsFirstWhenRunwayIsShort(t *testing.T) {
	r := newRig(t)
	var calls atomic.Int32
	r.store.OnRenew = func(ctx context.Context, id string) error { calls.Add(1); return nil }
	// Acquired long ago (a slow acquire): less than K+G+R of validity left.
	sent := r.clock.Now() - r.validity() + r.stopLead() + r.cfg.Timing.RenewEvery/2
	k := r.keep(t, sent)
	if calls.Load() != 1 {
		t.Fatalf("Keep made %d renewals before returning; want 1 to gain runway", calls.Load())
	}
	if e, _ := k.ValidUntil(); e != r.clock.Now()+r.validity() {
		t.Fatalf("E = %v after the runway renewal; want now + validity", e)
	}

	r2 := newRig(t)
	r2.store.OnRenew = func(ctx context.Context, id string) error { return lease.ErrUnavailable }
	_, err := lease.Keep(context.Background(), r2.l, r2.clock.Now()-r2.validity()+r2.stopLead(), r2.cfg)
	if err == nil {
		t.Fatal("Keep started with no runway and a failing store")
	}
}

func TestKeeperNonExpiringStoreChecksLoss(t *testing.T) {
	r := newRig(t)
	r.cfg.Limits = lease.Limits{Expires: false}
	k := r.keep(t, r.clock.Now())
	if _, ok := k.ValidUntil(); ok {
		t.Fatal("a non-expiring lease reported a deadline")
	}
	r.settle(t, 1) // no watchdog: only the renew loop sleeps
	r.store.OnRenew = func(ctx context.Context, id string) error { return lease.ErrLost }
	r.clock.Advance(r.cfg.Timing.RenewEvery)
	select {
	case <-k.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("keeper of a non-expiring lease ignored a lost answer")
	}
}

func TestKeeperStopWaits(t *testing.T) {
	r := newRig(t)
	k := r.keep(t, r.clock.Now())
	r.settle(t, 2)
	k.Stop()
	select {
	case <-k.KillC():
		t.Fatal("KillC closed by Stop")
	default:
	}
	if n := r.clock.Sleepers(); n != 0 {
		t.Fatalf("%d keeper goroutines still sleeping after Stop", n)
	}
	k.Stop() // idempotent
}
