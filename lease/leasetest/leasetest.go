// Package leasetest is the conformance suite every lease.Store must pass:
// the file, Redis, PostgreSQL, etcd and Azure Blob stores, and the scripted
// fake used by the keeper's timing tests (RunCandidates does the same for
// the standby registries). A store is correct for leaderrun exactly when this
// suite passes against a real server. Beside the suite it holds what
// several stores' own tests share: checks of one kind of store (Tokens100,
// RetrySameID, FrozenAndKilled), harnesses (ObjectHarness), and the means
// to start, freeze and reach their servers.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Harness tells the suite how to drive one store.
type Harness struct {
	// Open returns a store for one test. The suite closes it.
	Open func(t *testing.T) lease.Store
	// TTL is the lease duration the suite asks for; pick the shortest the
	// store allows so expiry tests stay fast. Ignored by non-expiring stores.
	TTL time.Duration
	// Break makes the store drop the current holder of name behind its back,
	// as an operator or a fault would (file: replace the lock file; Redis:
	// DEL the key; Azure: BreakLease).
	Break func(t *testing.T, s lease.Store, name string)
	// Abandon stops maintaining l without releasing it, as a crashed holder
	// would (file: close its descriptor). Nil means "do nothing": the lease
	// runs out on its own.
	Abandon func(t *testing.T, l lease.Lease)
	// TrimsAtStart says RecordRun trims the history only when it writes a
	// run's start record (Azure: compaction, off the release path, as
	// lease.History allows): until then readers may see more than keep
	// runs, the newest first as always.
	TrimsAtStart bool
	// PutRunEntry writes value, as it is, into the run history of name where
	// the store keeps the record of token (file and Azure: a line at the
	// end; Redis: a member scored token; etcd: the key of token), as another
	// program, a hand edit or a forger could. Nil skips the checks that need
	// it (a store whose history has typed columns: PostgreSQL).
	PutRunEntry func(t *testing.T, name string, token uint64, value []byte)
	// Rho and Epsilon are the clock-rate bound and store margin used to check
	// that no takeover happens before t_s + TTL·(1−ρ) − ε. Zero Rho means 0.01.
	Rho float64
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Rho == 0 {
		h.Rho = 0.01
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"OneWinner", testOneWinner},
		{"HeldReportsHolder", testHeldReportsHolder},
		{"RenewExtends", testRenewExtends},
		{"RenewAfterBreakIsLost", testRenewAfterBreak},
		{"ReleaseThenReacquire", testReleaseThenReacquire},
		{"ReleaseByNonHolderRefused", testReleaseByNonHolder},
		{"TakeoverAfterExpiry", testTakeoverAfterExpiry},
		{"TokensStrictlyIncrease", testTokensIncrease},
		{"CancelledContext", testCancelledContext},
		{"Status", testStatus},
		{"WaitReturnsAfterRelease", testWaitAfterRelease},
		{"ReleaseHeldKeepsTaken", testReleaseHeld},
		{"History", testHistory},
		{"HistoryNotEvicted", testHistoryNotEvicted},
		{"SlotsNeverExceed", testSlotsNeverExceed},
		{"SlotCrashFreed", testSlotCrashFreed},
		{"SlotsMismatchRefused", testSlotsMismatchRefused},
		{"OneSlotIsPlain", testOneSlotIsPlain},
		{"SlotStatusExact", testSlotStatusExact},
		{"SlotsListed", testSlotsListed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// name returns a lease name unique to this test run.
func name(t *testing.T) string {
	t.Helper()
	n := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(n) > 150 {
		n = n[len(n)-150:]
	}
	return n + "-" + lease.NewID()[:8]
}

func open(t *testing.T, h Harness) lease.Store {
	t.Helper()
	s := h.Open(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func req(n, holder string, h Harness) lease.Request {
	return lease.Request{Name: n, Label: holder, ID: lease.NewID(), TTL: h.TTL}
}

// heldReq is req with a TTL that load cannot exhaust (a minute, or the
// harness's when longer), for a check that the lease is still held when a
// later call reaches the store: at h.TTL (300 ms on several stores) ten
// racers on a loaded host (load 27) took longer than the first winner's
// lease, and a second racer won, lawfully, after it expired.
func heldReq(n, holder string, h Harness) lease.Request {
	r := req(n, holder, h)
	r.TTL = max(r.TTL, time.Minute)
	return r
}

func mustAcquire(t *testing.T, s lease.Store, r lease.Request) lease.Lease {
	t.Helper()
	l, err := s.TryAcquire(ctxT(t), r)
	if err != nil {
		t.Fatalf("TryAcquire(%s as %s): %v", r.Name, r.Label, err)
	}
	return l
}

func testOneWinner(t *testing.T, h Harness) {
	const n = 10
	stores := make([]lease.Store, n)
	for i := range stores {
		stores[i] = open(t, h)
	}
	nm := name(t)
	var (
		mu      sync.Mutex
		winners []lease.Lease
		held    int
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			l, err := stores[i].TryAcquire(context.Background(), heldReq(nm, fmt.Sprintf("racer-%d", i), h))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, l)
			case errors.Is(err, lease.ErrHeld):
				held++
			default:
				t.Errorf("racer %d: unexpected error: %v", i, err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 || held != n-1 {
		t.Fatalf("got %d winners and %d held among %d racers; want exactly 1 winner", len(winners), held, n)
	}
	if err := winners[0].Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testHeldReportsHolder(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	la := mustAcquire(t, a, heldReq(nm, "alpha:1", h))
	info := la.Info()
	if info.Name != nm || info.Label != "alpha:1" || info.Token == 0 || len(info.ID) != 32 {
		t.Fatalf("Info() = %+v; want name %q, holder alpha:1, token > 0, 32-hex ID", info, nm)
	}
	_, err := b.TryAcquire(ctxT(t), req(nm, "beta:2", h))
	var he *lease.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second TryAcquire: %v; want *HeldError", err)
	}
	if he.By.Label != "alpha:1" || he.By.Token != info.Token {
		t.Fatalf("HeldError.By = %+v; want holder alpha:1 token %d", he.By, info.Token)
	}
	if !strings.Contains(he.Error(), "alpha:1") {
		t.Fatalf("HeldError message %q does not name the holder", he.Error())
	}
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testRenewExtends(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	// Renew at TTL/3 for a third of a TTL past the first expiry: the lease
	// must never lapse. A TTL of at least 3 s: at the harness's (300 ms on
	// several stores) a loaded host's pause between two renewals outlasts
	// the lease, which then lapses lawfully.
	r := req(nm, "alpha", h)
	r.TTL = max(r.TTL, 3*time.Second)
	la := mustAcquire(t, a, r)
	span, step := 300*time.Millisecond, 50*time.Millisecond
	if a.Limits().Expires {
		span, step = r.TTL*4/3, r.TTL/3
	}
	for end := time.Now().Add(span); time.Now().Before(end); {
		time.Sleep(step) // the passage of time is the thing under test here
		if err := la.Renew(ctxT(t)); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if _, err := b.TryAcquire(ctxT(t), req(nm, "beta", h)); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("TryAcquire while renewed: %v; want ErrHeld", err)
		}
	}
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testRenewAfterBreak(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	la := mustAcquire(t, a, heldReq(nm, "alpha", h))
	h.Break(t, a, nm)
	if err := la.Renew(ctxT(t)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after break: %v; want ErrLost", err)
	}
	// The vanished lease must not have been re-created by that renew.
	lb := mustAcquire(t, b, heldReq(nm, "beta", h))
	if err := la.Renew(ctxT(t)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after another took over: %v; want ErrLost", err)
	}
	if err := lb.Renew(ctxT(t)); err != nil {
		t.Fatalf("new holder's Renew: %v", err)
	}
	if lb.Info().Token <= la.Info().Token {
		t.Fatalf("token after break %d <= old token %d", lb.Info().Token, la.Info().Token)
	}
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testReleaseThenReacquire(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	la := mustAcquire(t, a, heldReq(nm, "alpha", h))
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	lb := mustAcquire(t, b, heldReq(nm, "beta", h))
	if lb.Info().Token <= la.Info().Token {
		t.Fatalf("token %d after release <= previous %d", lb.Info().Token, la.Info().Token)
	}
	if err := la.Release(ctxT(t)); !errors.Is(err, lease.ErrNotHeld) && !errors.Is(err, lease.ErrLost) {
		t.Fatalf("second Release by old holder: %v; want ErrNotHeld or ErrLost", err)
	}
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testReleaseByNonHolder(t *testing.T, h Harness) {
	a, b, c := open(t, h), open(t, h), open(t, h)
	nm := name(t)
	la := mustAcquire(t, a, heldReq(nm, "alpha", h))
	h.Break(t, a, nm)
	lb := mustAcquire(t, b, heldReq(nm, "beta", h))
	if err := la.Release(ctxT(t)); !errors.Is(err, lease.ErrNotHeld) && !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release by former holder: %v; want ErrNotHeld or ErrLost", err)
	}
	got, err := c.Status(ctxT(t), nm)
	if err != nil || got == nil || got.Label != "beta" {
		t.Fatalf("Status after refused release = %+v, %v; want holder beta", got, err)
	}
	if _, err := c.TryAcquire(ctxT(t), heldReq(nm, "gamma", h)); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("TryAcquire after refused release: %v; want ErrHeld", err)
	}
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testTakeoverAfterExpiry(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	lim := a.Limits()
	sent := time.Now()
	la := mustAcquire(t, a, req(nm, "alpha", h))
	if h.Abandon != nil {
		h.Abandon(t, la)
	}
	ctx := ctxT(t)
	for {
		lb, err := b.TryAcquire(ctx, heldReq(nm, "beta", h))
		if err == nil {
			took := time.Since(sent)
			if lim.Expires {
				min := time.Duration(float64(h.TTL)*(1-h.Rho)) - lim.Epsilon
				if took < min {
					t.Fatalf("taken over %v after the acquire was sent; the lease (TTL %v) was still valid until %v", took, h.TTL, min)
				}
			}
			if lb.Info().Token <= la.Info().Token {
				t.Fatalf("token after takeover %d <= %d", lb.Info().Token, la.Info().Token)
			}
			if err := lb.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			return
		}
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Fatalf("TryAcquire while waiting for expiry: %v", err)
		}
		if err := b.Wait(ctx, nm, he); err != nil {
			t.Fatalf("Wait: %v (the abandoned lease never became free)", err)
		}
	}
}

func testTokensIncrease(t *testing.T, h Harness) {
	s := open(t, h)
	nm := name(t)
	var last uint64
	for i := 0; i < 20; i++ {
		l := mustAcquire(t, s, heldReq(nm, fmt.Sprintf("h%d", i), h))
		if tok := l.Info().Token; tok <= last {
			t.Fatalf("acquisition %d: token %d <= previous %d", i, tok, last)
		} else {
			last = tok
		}
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

func testCancelledContext(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if l, err := a.TryAcquire(ctx, heldReq(nm, "alpha", h)); err == nil {
		_ = l.Release(ctxT(t))
		t.Fatalf("TryAcquire with a cancelled context succeeded")
	}
	la := mustAcquire(t, a, heldReq(nm, "alpha", h))
	_, err := b.TryAcquire(ctxT(t), heldReq(nm, "beta", h))
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("TryAcquire: %v; want *HeldError", err)
	}
	if err := b.Wait(ctx, nm, he); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v; want context.Canceled", err)
	}
	if err := la.Renew(ctx); err == nil {
		t.Fatalf("Renew with a cancelled context reported success")
	}
	// A renew that failed on our side must not have lost the lease.
	if err := la.Renew(ctxT(t)); err != nil {
		t.Fatalf("Renew after a cancelled one: %v", err)
	}
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testStatus(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	if got, err := b.Status(ctxT(t), nm); err != nil || got != nil {
		t.Fatalf("Status of a never-used lease = %+v, %v; want nil, nil", got, err)
	}
	la := mustAcquire(t, a, heldReq(nm, "alpha:77", h))
	got, err := b.Status(ctxT(t), nm)
	if err != nil || got == nil {
		t.Fatalf("Status while held = %+v, %v", got, err)
	}
	want := la.Info()
	if got.Label != want.Label || got.Token != want.Token || got.Name != nm || got.Since.IsZero() {
		t.Fatalf("Status = %+v; want holder %q token %d name %q and a since time", got, want.Label, want.Token, nm)
	}
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got, err := b.Status(ctxT(t), nm); err != nil || got != nil {
		t.Fatalf("Status after release = %+v, %v; want nil, nil", got, err)
	}
}

func testWaitAfterRelease(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	nm := name(t)
	la := mustAcquire(t, a, heldReq(nm, "alpha", h))
	_, err := b.TryAcquire(ctxT(t), heldReq(nm, "beta", h))
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("TryAcquire: %v; want *HeldError", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctxT(t), nm, he) }()
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after release: %v", err)
	}
	lb := mustAcquire(t, b, heldReq(nm, "beta", h))
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// testReleaseHeld: a store keeps a lease
// released with a hold taken until the hold ends (TryAcquire says held,
// naming the last holder and the hold's end; Status shows it), a waiter
// gets it when the hold ends and not before, and its token is above the
// held one.
func testReleaseHeld(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	const hold = 2 * time.Second
	nm := name(t)
	la := mustAcquire(t, a, heldReq(nm, "alpha", h))
	sent := time.Now()
	if err := la.ReleaseHeld(ctxT(t), hold); err != nil {
		t.Fatalf("ReleaseHeld: %v", err)
	}
	_, err := b.TryAcquire(ctxT(t), heldReq(nm, "beta", h))
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("TryAcquire during the hold: %v; want *HeldError", err)
	}
	until := he.By.HeldUntil
	if he.By.Label != "alpha" || he.By.Token != la.Info().Token || until.Before(sent.Add(hold-100*time.Millisecond)) || until.After(time.Now().Add(hold+time.Second)) {
		t.Fatalf("held by %+v; want alpha's token %d, held until about %v", he.By, la.Info().Token, sent.Add(hold))
	}
	st, err := b.Status(ctxT(t), nm)
	if err != nil || st == nil || !st.HeldUntil.Equal(until) {
		t.Fatalf("Status during the hold = %+v, %v; want held until %v", st, err, until)
	}
	var lb lease.Lease
	for lb == nil {
		if err := b.Wait(ctxT(t), nm, he); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		l, err := b.TryAcquire(ctxT(t), heldReq(nm, "beta", h))
		switch {
		case err == nil:
			lb = l
		case errors.As(err, &he):
		default:
			t.Fatalf("TryAcquire after Wait: %v", err)
		}
	}
	got := time.Now()
	// The hold's end is a wall-clock reading of the store's host (here the
	// same machine); 50ms covers the granularity of Redis and the file store.
	if got.Before(until.Add(-50 * time.Millisecond)) {
		t.Fatalf("acquired at %v, before the hold ended at %v", got, until)
	}
	if late := got.Sub(until); late > 3*time.Second {
		t.Fatalf("acquired %v after the hold ended; a waiter should get it promptly", late)
	}
	if lb.Info().Token <= la.Info().Token {
		t.Fatalf("token after the hold %d, not above the held %d", lb.Info().Token, la.Info().Token)
	}
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
