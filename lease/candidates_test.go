package lease_test

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// waitCandidates blocks until name has n live candidates.
func waitCandidates(t *testing.T, s lease.CandidateRegistry, name string, n int) []lease.Candidate {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, _, err := s.Candidates(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == n {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d candidates, want %d: %+v", len(cs), n, cs)
		}
		time.Sleep(time.Millisecond) // polling an in-memory map; no event to await
	}
}

// Acquire's takeover by priority is checked on every store, and on the
// in-memory registry, by leasetest.RunCandidates (HighestPriorityTakesOver).

// A standby holds back δ for a dead better-ranked one, and no more: the
// store's δ, or AcquireOptions.PriorityStep in its place.
func TestAcquireDeadBetterCandidateDelaysByStep(t *testing.T) {
	for _, tc := range []struct {
		name              string
		storeStep, option time.Duration
	}{
		{"store's", 200 * time.Millisecond, 0},
		{"PriorityStep", 20 * time.Millisecond, 600 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step := cmp.Or(tc.option, tc.storeStep)
			took := deadBetterCandidateTakeover(t, tc.storeStep, tc.option)
			if took < step {
				t.Fatalf("p5 took over %v after the release: it did not hold back its δ (%v) for the better-ranked candidate", took, step)
			}
			if took > 2*step+time.Second {
				t.Fatalf("p5 took over %v after the release; want within about its δ (%v)", took, step)
			}
		})
	}
}

// deadBetterCandidateTakeover returns how long after a release a priority-5
// standby takes the lease while a priority-10 one, registered, never tries.
func deadBetterCandidateTakeover(t *testing.T, storeStep, option time.Duration) time.Duration {
	s := &leasetest.MemCandidates{MemStore: &leasetest.MemStore{},
		Timing: lease.CandidateTiming{Heartbeat: true, MinInterval: time.Second, Step: storeStep}}
	ctx := context.Background()
	first, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "leader", TTL: time.Minute}, lease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A registered candidate that never tries: a frozen standby, registered
	// for as long as a real heartbeat asks.
	_, expiry := s.Timing.HeartbeatEvery(1)
	if _, err := s.Join(ctx, "j", lease.Candidate{ID: "frozen", Label: "frozen", Priority: 10, Since: time.Now()}, expiry); err != nil {
		t.Fatal(err)
	}
	type result struct {
		a   *lease.Acquired
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "p5", TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever, Priority: 5, PriorityStep: option})
		done <- result{a, err}
	}()
	waitCandidates(t, s, "j", 2)
	released := time.Now()
	if err := first.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return time.Since(released)
}

// A registration no heartbeat could have made (another client wrote an
// expiry a year ahead) does not hold a real standby back.
func TestAcquireIgnoresFarFutureRegistration(t *testing.T) {
	step := 2 * time.Second // long, so that a hold-back cannot go unnoticed
	s := &leasetest.MemCandidates{MemStore: &leasetest.MemStore{},
		Timing: lease.CandidateTiming{Heartbeat: true, MinInterval: time.Second, Step: step}}
	ctx := context.Background()
	first, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "leader", TTL: time.Minute}, lease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Join(ctx, "j", lease.Candidate{ID: "squatter", Label: "squatter", Priority: 1000, Since: time.Now()}, 365*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		a, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Label: "real", TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever})
		if err == nil {
			err = a.Lease.Release(ctx)
		}
		done <- err
	}()
	waitCandidates(t, s, "j", 2)
	released := time.Now()
	if err := first.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(released); took >= step {
		t.Fatalf("the standby took over %v after the release: it held back for a registration expiring in a year", took)
	}
}

// herdCounter counts what standbys do after a release.
type herdCounter struct {
	*leasetest.MemCandidates
	tries, looks atomic.Int64
	waits        chan struct{} // one value per Wait entered
	listed       chan struct{} // one value per listing
}

func (h *herdCounter) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	h.tries.Add(1)
	return h.MemCandidates.TryAcquire(ctx, req)
}

func (h *herdCounter) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	h.looks.Add(1)
	defer func() { h.listed <- struct{}{} }()
	return h.MemCandidates.Candidates(ctx, name)
}

func (h *herdCounter) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	h.waits <- struct{}{}
	return h.MemCandidates.Wait(ctx, name, held)
}

// When the lease is released under many standbys of equal priority, only
// the front of the line tries; the rest look once, see the new holder and
// wait again. The longest waiting standby takes over.
func TestReleaseHerdOnlyFrontTries(t *testing.T) {
	const n = 20
	h := &herdCounter{MemCandidates: &leasetest.MemCandidates{MemStore: &leasetest.MemStore{},
		Timing: lease.CandidateTiming{Heartbeat: true, PerSecond: 100, MinInterval: time.Second, Step: 20 * time.Millisecond}},
		waits: make(chan struct{}, 10*n), listed: make(chan struct{}, 10*n)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := lease.Acquire(ctx, h, lease.Request{Name: "j", Label: "leader", TTL: time.Minute}, lease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan string, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := lease.Acquire(ctx, h, lease.Request{Name: "j", Label: fmt.Sprint("s", i), TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever})
			if err == nil {
				won <- a.Lease.Info().Label
			}
		}()
		// One at a time, so that the line is s0, s1, …; each has
		// waited and found its place (one listing) before the next.
		waitCandidates(t, h.MemCandidates, "j", i+1)
		<-h.waits
		<-h.listed
	}
	h.tries.Store(0)
	h.looks.Store(0)
	if err := first.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-won; got != "s0" {
		t.Fatalf("%s took over; want s0, the first in line", got)
	}
	for range n - 1 { // every other standby decided and waits again
		<-h.waits
	}
	if tries, looks := h.tries.Load(), h.looks.Load(); tries > lease.HerdFront || looks > n {
		t.Fatalf("after one release %d standbys made %d attempts and %d listings; want at most %d attempts (the front of the line) and one listing each",
			n, tries, looks, lease.HerdFront)
	}
}

// A reminder is not a sign that the lease is free: the waiter makes one
// attempt (which refreshes the holder it reports) and lists nobody, so an
// idle crowd costs a registry without cheap listings (the file store reads
// every standby's file) nothing per reminder.
func TestReminderDoesNotList(t *testing.T) {
	h := &herdCounter{MemCandidates: &leasetest.MemCandidates{MemStore: &leasetest.MemStore{},
		Timing: lease.CandidateTiming{Heartbeat: true, MinInterval: time.Second, Step: 20 * time.Millisecond}},
		waits: make(chan struct{}, 100), listed: make(chan struct{}, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := lease.Acquire(ctx, h, lease.Request{Name: "j", Label: "leader", TTL: time.Minute}, lease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Lease.Release(context.Background())
	reminders := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = lease.Acquire(ctx, h, lease.Request{Name: "j", Label: "standby", TTL: time.Minute}, lease.AcquireOptions{
			Wait: lease.WaitForever, RemindEvery: 20 * time.Millisecond,
			OnWait: func(ev lease.WaitEvent) {
				if ev.Kind == lease.WaitReminder {
					reminders <- struct{}{}
				}
			}})
	}()
	<-h.listed // the standby found its place in the line
	h.looks.Store(0)
	for range 3 {
		<-reminders
	}
	cancel()
	<-done
	if n := h.looks.Load(); n != 0 {
		t.Fatalf("a standby listed the standbys %d times on reminders while the lease stayed held; want none", n)
	}
}
