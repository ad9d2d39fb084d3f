package leasetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// RunCandidates runs the standby-registry checks against a store that is a
// lease.CandidateRegistry, as subtests of t: takeover order, leave, lapse
// of a registration that is not refreshed (or whose process died: Kill, when
// the store needs no heartbeat), the holder reported with the listing, and
// Acquire giving the lease to the highest-priority standby.
func RunCandidates(t *testing.T, h Harness) {
	t.Helper()
	cases := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"Order", candidatesOrder},
		{"LeaveAndHolder", candidatesLeaveAndHolder},
		{"HighestPriorityTakesOver", candidatesHighestPriority},
	}
	// Lapse is for stores with heartbeats; the others' candidates live as
	// long as their process, which their own tests kill (no case is
	// skipped: a skipped test counts as a failure in CI).
	if open(t, h).CandidateTiming().Heartbeat {
		cases = append(cases, struct {
			name string
			run  func(*testing.T, Harness)
		}{"Lapse", candidatesLapse})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
}

// registry opens a store of h, and its registry.
func registry(t *testing.T, h Harness) (lease.Store, lease.CandidateRegistry) {
	s := open(t, h)
	return s, s
}

// candidatesOrder: the listing is in takeover order (priority, then
// longest waiting) and keeps Since.
func candidatesOrder(t *testing.T, h Harness) {
	_, r := registry(t, h)
	n, ctx := name(t), ctxFor(t)
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i, p := range []int{0, 10, 5, 5} {
		c := lease.Candidate{ID: lease.NewID(), Label: fmt.Sprintf("c%d-p%d", i, p), Priority: p, Since: base.Add(time.Duration(i) * time.Second)}
		if _, err := r.Join(ctx, n, c, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	cs, holder, err := r.Candidates(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if holder != nil {
		t.Fatalf("holder %+v of a lease nobody took", holder)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Label)
	}
	if want := "[c1-p10 c2-p5 c3-p5 c0-p0]"; fmt.Sprint(got) != want {
		t.Fatalf("candidates %v; want %s", got, want)
	}
	if !cs[0].Since.Equal(base.Add(time.Second)) {
		t.Fatalf("since %v; want %v", cs[0].Since, base.Add(time.Second))
	}
}

// candidatesLeaveAndHolder: a refresh counts the live standbys, Leave is
// idempotent, and the listing reports the holder.
func candidatesLeaveAndHolder(t *testing.T, h Harness) {
	s, r := registry(t, h)
	n, ctx := name(t), ctxFor(t)
	a := lease.Candidate{ID: lease.NewID(), Label: "a", Since: time.Now()}
	b := lease.Candidate{ID: lease.NewID(), Label: "b", Since: time.Now()}
	for _, c := range []lease.Candidate{a, b} {
		if _, err := r.Join(ctx, n, c, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if live, err := r.Join(ctx, n, a, time.Minute); err != nil || live != 2 {
		t.Fatalf("refresh: %d live, %v; want 2", live, err)
	}
	if err := r.Leave(ctx, n, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Leave(ctx, n, a.ID); err != nil {
		t.Fatalf("leaving twice: %v", err)
	}
	l, err := s.TryAcquire(ctx, lease.Request{Name: n, Label: "leader", ID: lease.NewID(), TTL: max(h.TTL, time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	var (
		cs     []lease.Candidate
		holder *lease.Holder
	)
	for deadline := time.Now().Add(10 * time.Second); ; {
		cs, holder, err = r.Candidates(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 1 && cs[0].Label == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("candidates %+v; want only b", cs)
		}
		time.Sleep(5 * time.Millisecond) // a store may finish Leave after it returned; nothing announces it here
	}
	if holder == nil || holder.Label != "leader" || holder.Token != l.Info().Token {
		t.Fatalf("holder %+v; want leader with token %d", holder, l.Info().Token)
	}
}

// candidatesLapse: a registration that is not refreshed lapses after its
// expiry, not before (stores with heartbeats).
func candidatesLapse(t *testing.T, h Harness) {
	s, r := registry(t, h)
	n, ctx := name(t), ctxFor(t)
	// A second more than the store's ε: a store that counts in whole
	// seconds (Azure) may end a registration up to ε early, so one of 1s
	// could lapse before anything could list it.
	eps := s.Limits().Epsilon
	ttl := time.Second + eps
	earliest := ttl - eps - 100*time.Millisecond
	c := lease.Candidate{ID: lease.NewID(), Label: "short", Since: time.Now()}
	// The expiry counts from the join's request at the earliest (a store
	// may stamp its end before the write goes out: objlease does), so the
	// lapse is judged from before Join; a Join slow under load must not
	// look like an early lapse.
	asked := time.Now()
	if _, err := r.Join(ctx, n, c, ttl); err != nil {
		t.Fatal(err)
	}
	joined := time.Now()
	cs, _, err := r.Candidates(ctx, n)
	if err != nil || len(cs) != 1 && time.Since(joined) < earliest {
		t.Fatalf("candidates %+v, %v %v after joining; want the one just joined", cs, err, time.Since(joined))
	}
	for {
		cs, _, err := r.Candidates(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			// A store whose clock has coarse steps (Azure: Last-Modified in
			// whole seconds) may end it up to ε early.
			if time.Since(asked) < earliest {
				t.Fatalf("registration lapsed %v after the join was asked for (%v after it returned); asked for %v", time.Since(asked), time.Since(joined), ttl)
			}
			return
		}
		if time.Since(joined) > 10*time.Second {
			t.Fatalf("registration still live %v after asking for %v", time.Since(joined), ttl)
		}
		// The lapse is a moment on the store's clock: nothing announces it.
		time.Sleep(50 * time.Millisecond)
	}
}

// candidatesHighestPriority: when the lease frees, Acquire gives it to the
// highest-priority standby, and every winner leaves the standbys.
func candidatesHighestPriority(t *testing.T, h Harness) {
	for round := range 3 {
		s, r := registry(t, h)
		n, ctx := name(t), ctxFor(t)
		// The leader's lease must outlast the three standbys' joining (it is
		// never renewed here): with the store's shortest TTL, a loaded
		// machine let it expire first, a standby took over, and the three
		// were never listed together. It is released explicitly below.
		first, err := lease.Acquire(ctx, s, lease.Request{Name: n, Label: "leader", TTL: max(h.TTL, time.Minute)}, lease.AcquireOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The order is promised to candidates that notice a release within
		// δ of each other: a loaded machine can stall one for longer than
		// the store's δ, so the standbys raise it (PriorityStep), as a user
		// would there.
		step := max(r.CandidateTiming().Step, time.Second)
		won := make(chan string, 3)
		var wg sync.WaitGroup
		for _, p := range []int{0, 10, 5} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws := open(t, h) // each standby its own store, as its own process would
				a, err := lease.Acquire(ctx, ws, lease.Request{Name: n, Label: fmt.Sprint("p", p), TTL: h.TTL},
					lease.AcquireOptions{Wait: lease.WaitForever, Priority: p, CallTimeout: 5 * time.Second, PriorityStep: step})
				if err != nil {
					t.Error(err)
					return
				}
				won <- a.Lease.Info().Label
				_ = a.Lease.Release(ctx)
			}()
		}
		// The standbys join from their own goroutines.
		awaitListed(ctx, t, r, n, 3, 30*time.Second, fmt.Sprintf("round %d: not 3 standbys listed after 30s", round))
		if err := first.Lease.Release(ctx); err != nil {
			t.Fatalf("round %d: the leader's release: %v", round, err)
		}
		if got := <-won; got != "p10" {
			t.Fatalf("round %d: %s took the lease first; want p10", round, got)
		}
		wg.Wait()
		// Each winner left the standbys; a store may finish a Leave after
		// it returned, and nothing announces it here.
		awaitListed(ctx, t, r, n, 0, 10*time.Second, fmt.Sprintf("round %d: standbys left behind after every one ran", round))
	}
}

// awaitListed polls r until it lists want standbys of n, for at most within;
// then it fails the test with failure and the last listing.
func awaitListed(ctx context.Context, t *testing.T, r lease.CandidateRegistry, n string, want int, within time.Duration, failure string) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		cs, _, err := r.Candidates(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v", failure, cs)
		}
	}
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
