package lease_test

import (
	"context"
	"fmt"
	"sync"
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

func TestAcquireHighestPriorityStandbyWins(t *testing.T) {
	for round := range 10 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			s := &leasetest.MemCandidates{MemStore: &leasetest.MemStore{},
				Timing: lease.CandidateTiming{Heartbeat: true, MinInterval: time.Second, Step: 50 * time.Millisecond}}
			ctx := context.Background()
			first, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Holder: "leader", TTL: time.Minute}, lease.AcquireOptions{})
			if err != nil {
				t.Fatal(err)
			}
			won := make(chan string, 3)
			var wg sync.WaitGroup
			for _, p := range []int{0, 10, 5} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Holder: fmt.Sprint("p", p), TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever, Priority: p})
					if err != nil {
						t.Error(err)
						return
					}
					won <- a.Lease.Info().Holder
					_ = a.Lease.Release(ctx)
				}()
			}
			cs := waitCandidates(t, s, "j", 3)
			if cs[0].Priority != 10 || cs[1].Priority != 5 || cs[2].Priority != 0 {
				t.Fatalf("candidates not in takeover order: %+v", cs)
			}
			if err := first.Lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := <-won; got != "p10" {
				t.Fatalf("%s took the lease first; want p10", got)
			}
			wg.Wait()
			if cs, _, _ := s.Candidates(ctx, "j"); len(cs) != 0 {
				t.Fatalf("candidates left behind: %+v", cs)
			}
		})
	}
}

func TestAcquireDeadBetterCandidateDelaysByStep(t *testing.T) {
	step := 200 * time.Millisecond
	s := &leasetest.MemCandidates{MemStore: &leasetest.MemStore{},
		Timing: lease.CandidateTiming{Heartbeat: true, MinInterval: time.Second, Step: step}}
	ctx := context.Background()
	first, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Holder: "leader", TTL: time.Minute}, lease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A registered candidate that never tries: a frozen standby.
	if _, err := s.Join(ctx, "j", lease.Candidate{ID: "frozen", Holder: "frozen", Priority: 10, Since: time.Now()}, time.Hour); err != nil {
		t.Fatal(err)
	}
	type result struct {
		a   *lease.Acquired
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := lease.Acquire(ctx, s, lease.Request{Name: "j", Holder: "p5", TTL: time.Minute}, lease.AcquireOptions{Wait: lease.WaitForever, Priority: 5})
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
	took := time.Since(released)
	if took < step {
		t.Fatalf("p5 took over %v after the release: it did not hold back its δ (%v) for the better-ranked candidate", took, step)
	}
	if took > 2*step+time.Second {
		t.Fatalf("p5 took over %v after the release; want within about its δ (%v)", took, step)
	}
}
