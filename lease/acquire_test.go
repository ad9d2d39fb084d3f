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

func TestAcquireNoWaitReportsHolder(t *testing.T) {
	s := &leasetest.MemStore{}
	ctx := context.Background()
	if _, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "first", TTL: time.Minute}, lease.AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "second", TTL: time.Minute}, lease.AcquireOptions{Wait: 0})
	var he *lease.HeldError
	if !errors.As(err, &he) || he.By.Label != "first" {
		t.Fatalf("Acquire --wait 0 on a held lease: %v; want *HeldError naming first", err)
	}
}

func TestAcquireWaitRunsOut(t *testing.T) {
	s := &leasetest.MemStore{}
	ctx := context.Background()
	if _, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "first", TTL: time.Minute}, lease.AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "second", TTL: time.Minute}, lease.AcquireOptions{Wait: 50 * time.Millisecond})
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire after the wait ran out: %v; want ErrHeld", err)
	}
}

func TestAcquireWaitsForRelease(t *testing.T) {
	s := &leasetest.MemStore{}
	ctx := context.Background()
	first, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "first", TTL: time.Minute}, lease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		a, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "second", TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever})
		if err == nil && a.Lease.Info().Label != "second" {
			err = errors.New("wrong holder")
		}
		done <- err
	}()
	// Release once the waiter is provably waiting (it reported the holder in Wait).
	for {
		if h, _ := s.Status(ctx, "j"); h == nil || h.Label != "first" {
			t.Fatal("first holder vanished")
		}
		select {
		case err := <-done:
			t.Fatalf("waiter returned while the lease was held: %v", err)
		default:
		}
		if err := first.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		break
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

func TestAcquireCancelWhileWaiting(t *testing.T) {
	s := &leasetest.MemStore{}
	if _, err := lease.Acquire(context.Background(), s, lease.Request{Name: "j", Label: "first", TTL: time.Minute}, lease.AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("got SIGTERM")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "second", TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever})
		done <- err
	}()
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Fatalf("Acquire after cancel: %v; want the cancel cause", err)
	}
	if h, _ := s.Status(context.Background(), "j"); h == nil || h.Label != "first" {
		t.Fatalf("a cancelled waiter changed the store: %+v", h)
	}
}

// flakyStore fails its first attempts with an unknown outcome.
type flakyStore struct {
	*leasetest.MemStore
	fails atomic.Int32
	ids   []string
}

func (f *flakyStore) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	f.ids = append(f.ids, req.ID)
	if f.fails.Add(-1) >= 0 {
		return nil, lease.ErrUnavailable
	}
	return f.MemStore.TryAcquire(ctx, req)
}

func TestAcquireRetriesTransientWithSameIDAndEarliestSendTime(t *testing.T) {
	clock := &leasetest.FakeClock{}
	clock.Advance(time.Hour)
	s := &flakyStore{MemStore: &leasetest.MemStore{Clock: clock}}
	s.fails.Store(2)
	start := clock.Now()
	done := make(chan *lease.Acquired, 1)
	go func() {
		a, err := lease.Acquire(context.Background(), s, lease.Request{Name: "j", Label: "me", TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever, Clock: clock})
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	var a *lease.Acquired
	for a == nil {
		select {
		case a = <-done:
		default:
			if clock.Sleepers() > 0 {
				clock.Advance(time.Second)
			}
			time.Sleep(100 * time.Microsecond) // polling the fake clock's sleepers
		}
	}
	if a == nil {
		t.FailNow()
	}
	if len(s.ids) != 3 || s.ids[0] != s.ids[1] || s.ids[1] != s.ids[2] {
		t.Fatalf("attempt IDs %v; want one ID reused by every retry", s.ids)
	}
	if a.SentAt != start {
		t.Fatalf("SentAt = +%v; want the first attempt with an unknown outcome (+0)", a.SentAt-start)
	}
}

func TestAcquireConfigErrorIsImmediate(t *testing.T) {
	s := &leasetest.MemStore{}
	_, err := lease.Acquire(context.Background(), s, lease.Request{Name: "../bad"}, lease.AcquireOptions{Wait: lease.WaitForever})
	if !errors.Is(err, lease.ErrBadName) {
		t.Fatalf("Acquire with a bad name: %v; want ErrBadName at once", err)
	}
}

// Acquire reports its waiting: started, holder changed, reminders, and how
// long it waited in the end.
func TestAcquireWaitEvents(t *testing.T) {
	s := &leasetest.MemStore{}
	ctx := context.Background()
	take := func(holder string) lease.Lease {
		l, err := s.TryAcquire(ctx, lease.Request{Name: "j", Label: holder, ID: lease.NewID(), TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := take("first")
	var (
		kinds     []lease.WaitKind
		second    lease.Lease
		changed   bool
		reminders int
	)
	onWait := func(ev lease.WaitEvent) {
		kinds = append(kinds, ev.Kind)
		switch ev.Kind {
		case lease.WaitStarted:
			if ev.By.Label != "first" || len(kinds) != 1 {
				t.Errorf("first event %v by %q", kinds, ev.By.Label)
			}
			_ = first.Release(ctx)
			second = take("second")
		case lease.WaitHolderChanged:
			changed = changed || ev.By.Label == "second"
		case lease.WaitReminder:
			reminders++
		}
		if changed && reminders >= 2 {
			_ = second.Release(ctx)
		}
	}
	a, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "me", TTL: time.Hour},
		lease.AcquireOptions{Wait: lease.WaitForever, OnWait: onWait, RemindEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !changed || reminders < 2 {
		t.Fatalf("events %v; want started, the change to second, two reminders", kinds)
	}
	if a.Waited <= 0 {
		t.Fatalf("Waited %v after waiting", a.Waited)
	}
	b, err := lease.Acquire(ctx, s, lease.Request{Name: "k", Label: "me", TTL: time.Hour}, lease.AcquireOptions{})
	if err != nil || b.Waited != 0 {
		t.Fatalf("Acquire of a free lease: %v, Waited %v; want 0", err, b.Waited)
	}
}

// heldThenTimingOut answers its first attempt from the MemStore (the lease
// is held) and every later one with a transient failure, as a store whose
// attempts time out under contention.
type heldThenTimingOut struct {
	*leasetest.MemStore
	calls atomic.Int32
}

func (h *heldThenTimingOut) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if h.calls.Add(1) == 1 {
		return h.MemStore.TryAcquire(ctx, req)
	}
	return nil, lease.NewError("no answer in time (acquire)", lease.ErrUnavailable, context.DeadlineExceeded)
}

// Candidates times out too: a listing that found the lease held would
// keep the waiter from trying.
func (h *heldThenTimingOut) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	return nil, nil, lease.NewError("no answer in time (candidates)", lease.ErrUnavailable, context.DeadlineExceeded)
}

// Wait says at once that the lease may be free, so the next attempt comes.
func (h *heldThenTimingOut) Wait(ctx context.Context, _ string, _ *lease.HeldError) error {
	return ctx.Err()
}

// A wait that runs out while the attempts time out, after one found the
// lease held, gave up on a held lease: it ends as held (ErrHeld, naming the
// holder), not as a store failure. With no answer at all it stays one.
func TestAcquireWaitRunsOutDuringTransientFailures(t *testing.T) {
	mem := &leasetest.MemStore{}
	ctx := context.Background()
	if _, err := lease.Acquire(ctx, mem, lease.Request{Name: "j", Label: "first", TTL: time.Minute}, lease.AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &heldThenTimingOut{MemStore: mem}
	_, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "second", TTL: time.Minute}, lease.AcquireOptions{Wait: 300 * time.Millisecond})
	var he *lease.HeldError
	if !errors.As(err, &he) || he.By.Label != "first" || errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Acquire after the wait ran out amid timeouts: %v (after %d attempts); want ErrHeld naming first", err, s.calls.Load())
	}
	if s.calls.Load() < 2 {
		t.Fatalf("%d attempts; the test wants at least one that timed out", s.calls.Load())
	}
	down := &flakyStore{MemStore: &leasetest.MemStore{}}
	down.fails.Store(1 << 30)
	if _, err := lease.Acquire(ctx, down, lease.Request{Name: "j", Label: "third", TTL: time.Minute}, lease.AcquireOptions{Wait: 100 * time.Millisecond}); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Acquire on a store that never answered: %v; want ErrUnavailable", err)
	}
}
