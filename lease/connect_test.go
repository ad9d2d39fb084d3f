package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// slowSetupStore is a store whose connection takes setup to set up, as a
// loaded PostgreSQL's login does: TryAcquire on no connection sets one up
// first, within its own (call timeout's) context, as the network stores do.
type slowSetupStore struct {
	*leasetest.MemStore
	setup time.Duration
	// refuse makes every set-up fail as a refused connection does.
	refuse bool

	mu        sync.Mutex
	connected bool
	connectAt time.Duration // BootClock reading when the set-up finished
	setups    atomic.Int32
}

var errRefused = lease.NewError("cannot reach the store: connection refused", lease.ErrUnavailable)

func (s *slowSetupStore) Connect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connected {
		return nil
	}
	s.setups.Add(1)
	if s.refuse {
		return errRefused
	}
	t := time.NewTimer(s.setup) // the server's slowness, not a synchronisation
	defer t.Stop()
	select {
	case <-ctx.Done():
		return lease.NewError("no answer in time (connecting and logging in)", lease.ErrUnavailable, context.DeadlineExceeded)
	case <-t.C:
	}
	s.connected, s.connectAt = true, lease.BootClock{}.Now()
	return nil
}

func (s *slowSetupStore) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := s.Connect(ctx); err != nil {
		return nil, err
	}
	return s.MemStore.TryAcquire(ctx, req)
}

// A set-up slower than the call timeout is waited for, within the wait: the
// acquisition succeeds, and its validity counts from a send after the
// set-up. Were set-up held to the call timeout (as a TryAcquire that
// connects is), every attempt would time out and Acquire would fail with
// the store unavailable for the whole wait.
func TestAcquireSetupOutlastsCallTimeout(t *testing.T) {
	s := &slowSetupStore{MemStore: &leasetest.MemStore{}, setup: 200 * time.Millisecond}
	a, err := lease.Acquire(context.Background(), s, lease.Request{Name: "j", Label: "me", TTL: time.Minute},
		lease.AcquireOptions{Wait: 5 * time.Second, CallTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("Acquire with a set-up 20 times the call timeout: %v (after %d set-ups)", err, s.setups.Load())
	}
	if a.SentAt < s.connectAt {
		t.Fatalf("validity counts from %v, before the set-up ended at %v: set-up is no part of the lease's time", a.SentAt, s.connectAt)
	}
	if n := s.setups.Load(); n != 1 {
		t.Fatalf("%d set-ups; want one, kept for the attempt", n)
	}
}

// A wait that runs out during a set-up ends as held when an earlier answer
// said the lease was held (exit 75, not a store failure); a store refused
// for the whole wait ends as unavailable; a refused login at once.
func TestAcquireWaitRunsOutDuringSetup(t *testing.T) {
	ctx := context.Background()
	mem := &leasetest.MemStore{}
	if _, err := lease.Acquire(ctx, mem, lease.Request{Name: "j", Label: "first", TTL: time.Minute}, lease.AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &heldThenSlowSetup{slowSetupStore: slowSetupStore{MemStore: mem, setup: time.Hour, connected: true}}
	_, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "second", TTL: time.Minute}, lease.AcquireOptions{Wait: 300 * time.Millisecond, CallTimeout: 10 * time.Millisecond})
	var he *lease.HeldError
	if !errors.As(err, &he) || he.By.Label != "first" || errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Acquire whose wait ran out in a set-up after a held answer: %v; want ErrHeld naming first", err)
	}
	down := &slowSetupStore{MemStore: &leasetest.MemStore{}, refuse: true}
	_, err = lease.Acquire(ctx, down, lease.Request{Name: "j", Label: "third", TTL: time.Minute}, lease.AcquireOptions{Wait: 300 * time.Millisecond})
	if !errors.Is(err, lease.ErrUnavailable) || down.setups.Load() < 2 {
		t.Fatalf("Acquire on a store that refused every set-up: %v after %d set-ups; want ErrUnavailable after retries", err, down.setups.Load())
	}
	bad := &configSetupStore{MemStore: &leasetest.MemStore{}}
	_, err = lease.Acquire(ctx, bad, lease.Request{Name: "j", Label: "fourth", TTL: time.Minute}, lease.AcquireOptions{Wait: time.Hour})
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Acquire on a store that refused the login: %v; want ErrConfig at once", err)
	}
}

// heldThenSlowSetup answers its first attempt from the MemStore (the lease
// is held), then loses its connection: every later set-up outlasts the
// wait.
type heldThenSlowSetup struct {
	slowSetupStore
}

func (h *heldThenSlowSetup) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := h.slowSetupStore.TryAcquire(ctx, req)
	h.mu.Lock()
	h.connected = false
	h.mu.Unlock()
	return l, err
}

// Wait says at once that the lease may be free, so the next attempt comes.
func (h *heldThenSlowSetup) Wait(ctx context.Context, _ string, _ *lease.HeldError) error {
	return ctx.Err()
}

// configSetupStore refuses the login.
type configSetupStore struct{ *leasetest.MemStore }

func (c *configSetupStore) Connect(context.Context) error {
	return lease.NewError("the store refused the login", lease.ErrConfig)
}

// connectingLease is a lease whose connection is set up (Connect) before
// each renewal, taking setup on the fake clock.
type connectingLease struct {
	lease.Lease
	r        *keeperRig
	setup    time.Duration
	calls    atomic.Int32
	budget   atomic.Int64 // the set-up's real-time bound, as Connect saw it
	stopLeft atomic.Int64 // time left to the stop point then, on the fake clock
}

func (c *connectingLease) Connect(ctx context.Context) error {
	c.calls.Add(1)
	dl, ok := ctx.Deadline()
	if !ok {
		c.budget.Store(-1)
	} else {
		c.budget.Store(int64(time.Until(dl)))
	}
	c.stopLeft.Store(int64(c.r.validity() - c.r.stopLead())) // E − K − G from the last send
	c.r.clock.Advance(c.setup)
	return nil
}

// The keeper sets a lease's connection up before each renewal within the
// time left to the stop point, never beyond it (and not within the call
// timeout), and counts the renewal's validity from a send after the set-up.
func TestKeeperConnectsBeforeRenewal(t *testing.T) {
	r := newRig(t)
	sent := r.clock.Now()
	c := &connectingLease{Lease: r.l, r: r, setup: 400 * time.Millisecond}
	r.l = c
	var renewSentAt atomic.Int64
	r.store.OnRenew = func(ctx context.Context, id string) error {
		renewSentAt.Store(int64(r.clock.Now()))
		return nil
	}
	k := r.keep(t, sent)
	r.settle(t, 2)
	r.clock.Advance(r.cfg.Timing.RenewEvery)
	r.settle(t, 2)
	if c.calls.Load() != 1 {
		t.Fatalf("%d set-ups before the first renewal; want 1", c.calls.Load())
	}
	left := time.Duration(c.stopLeft.Load()) - r.cfg.Timing.RenewEvery
	if b := time.Duration(c.budget.Load()); b <= 0 || b > left {
		t.Fatalf("set-up bounded by %v (real time); want a bound within the %v left to the stop point", b, left)
	}
	ts := time.Duration(renewSentAt.Load())
	if want := sent + r.cfg.Timing.RenewEvery + c.setup; ts != want {
		t.Fatalf("renewal sent at +%v; want after the set-up, at +%v", ts-sent, want-sent)
	}
	if e, _ := k.ValidUntil(); e != ts+r.validity() {
		t.Fatalf("ValidUntil = +%v; want the renewal's send time + validity = +%v", e-sent, ts+r.validity()-sent)
	}
}
