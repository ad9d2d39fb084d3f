package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The slot cases of Run: lease.Request.Slots over the store, through
// lease.Acquire (each slot is a lease of the store's own).

// slotReq is a request for one of n slots of nm, with a TTL that load
// cannot exhaust (heldReq): a case that wants a slot to run out sets its
// own.
func slotReq(nm, holder string, n int, h Harness) lease.Request {
	r := heldReq(nm, holder, h)
	r.Slots = n
	return r
}

// acquireSlot takes a slot of r.Name, waiting up to the test's deadline.
func acquireSlot(t *testing.T, s lease.Store, r lease.Request, wait time.Duration) (lease.Lease, error) {
	t.Helper()
	acq, err := lease.Acquire(ctxT(t), s, r, lease.AcquireOptions{Wait: wait, CallTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	return acq.Lease, nil
}

// testSlotsNeverExceed: n+1 contenders take and give back the n slots of
// one lease, many times over. At no moment do more than n hold a slot, no
// two hold the same slot, every token is new, and each acquisition's token
// is above every token granted before it began (the tokens of the slots
// of a lease come from one counter).
func testSlotsNeverExceed(t *testing.T, h Harness) {
	const n, rounds = 3, 50 // 200 runs
	ledger := &slotLedger{n: n, name: name(t), active: map[int]string{}, tokens: map[uint64]bool{}}
	var wg sync.WaitGroup
	for c := range n + 1 {
		s := open(t, h)
		holder := fmt.Sprint("c", c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				before := ledger.highest()
				// Nothing renews these leases: a TTL that a loaded machine
				// cannot outlast between acquisition and release (the
				// store's shortest, 300ms on PostgreSQL, did: a slot expired
				// and was rightly taken again while the test counted it
				// held).
				rq := slotReq(ledger.name, holder, n, h)
				rq.TTL = max(h.TTL, time.Minute)
				l, err := acquireSlot(t, s, rq, lease.WaitForever)
				if err != nil {
					t.Errorf("contender %d round %d: %v", c, r, err)
					return
				}
				info := l.Info()
				ledger.take(t, holder, info, before)
				time.Sleep(time.Millisecond) // a run, however short
				ledger.give(info.Slot)
				if err := l.Release(ctxT(t)); err != nil {
					t.Errorf("Release of slot %d: %v", info.Slot, err)
				}
			}
		}()
	}
	wg.Wait()
}

// slotLedger is what testSlotsNeverExceed's contenders hold at each
// moment, and the tokens granted so far; it reports every broken promise.
type slotLedger struct {
	n    int    // the lease's slots
	name string // the lease's name

	mu      sync.Mutex
	active  map[int]string // slot → holder
	granted uint64         // the highest token granted so far
	tokens  map[uint64]bool
}

// highest returns the highest token granted so far.
func (g *slotLedger) highest() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.granted
}

// take records that holder got the slot info describes, having begun to
// acquire it when before was the highest token granted.
func (g *slotLedger) take(t *testing.T, holder string, info lease.Holder, before uint64) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if who, ok := g.active[info.Slot]; ok {
		t.Errorf("slot %d taken by %s while %s holds it", info.Slot, holder, who)
	}
	g.active[info.Slot] = holder
	switch {
	case len(g.active) > g.n:
		t.Errorf("%d holders of %d slots: %v", len(g.active), g.n, g.active)
	case info.Slots != g.n || info.Slot < 0 || info.Slot >= g.n || info.Name != g.name || info.Label != holder:
		t.Errorf("Info() = %+v; want slot 0-%d of %d of %s, holder %s", info, g.n-1, g.n, g.name, holder)
	case g.tokens[info.Token]:
		t.Errorf("token %d granted twice", info.Token)
	case info.Token <= before:
		t.Errorf("token %d of slot %d is not above %d, granted before the acquisition began", info.Token, info.Slot, before)
	}
	g.tokens[info.Token] = true
	g.granted = max(g.granted, info.Token)
}

// give records that slot is no longer held: called before its release,
// after which another contender may take it at once.
func (g *slotLedger) give(slot int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.active, slot)
}

// testSlotCrashFreed: a holder of one of the slots that stops (abandoned,
// as by a crash) frees its slot, after the TTL on an expiring store; a
// waiter for a full lease takes that slot, with a higher token.
func testSlotCrashFreed(t *testing.T, h Harness) {
	const n = 3
	nm := name(t)
	s := open(t, h)
	ls := make([]lease.Lease, n)
	// The slot that crashes is taken last, and with a TTL that the next two
	// calls outlast on a loaded machine; the others' outlast the whole
	// set-up before their renewals start.
	crashTTL := max(h.TTL, 2*time.Second)
	var sent time.Time // when the acquisition of the slot that crashes was sent
	for i := range ls {
		rq := slotReq(nm, fmt.Sprint("h", i), n, h)
		rq.TTL = max(h.TTL, time.Minute)
		if i == n-1 {
			sent, rq.TTL = time.Now(), crashTTL
		}
		l, err := acquireSlot(t, s, rq, 0)
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		ls[i] = l
	}
	b := open(t, h)
	if _, err := acquireSlot(t, b, slotReq(nm, "late", n, h), 0); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a fourth contender with all %d slots held: %v; want ErrHeld", n, err)
	}
	// The live holders renew theirs while the crashed one's runs out.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for _, live := range ls[:n-1] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			renewUntil(t, live, max(h.TTL/4, 10*time.Millisecond), stop)
		}()
	}
	crashed := ls[n-1].Info()
	if h.Abandon != nil {
		h.Abandon(t, ls[n-1].(interface{ Unwrap() lease.Lease }).Unwrap())
	}
	l, err := acquireSlot(t, b, slotReq(nm, "late", n, h), lease.WaitForever)
	if err != nil {
		t.Fatalf("waiting for the crashed holder's slot: %v", err)
	}
	took := time.Since(sent)
	info := l.Info()
	if lim := s.Limits(); lim.Expires {
		if least := time.Duration(float64(crashTTL)*(1-h.Rho)) - lim.Epsilon; took < least {
			t.Fatalf("slot %d taken %v after the crash; it was valid for %v", info.Slot, took, least)
		}
	}
	if info.Slot != crashed.Slot || info.Token <= ls[n-1].Info().Token {
		t.Fatalf("took slot %d token %d; want slot %d with a token above %d", info.Slot, info.Token, crashed.Slot, ls[n-1].Info().Token)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// testSlotsMismatchRefused: a contender with another number of slots than
// a holder it finds is refused (ErrSlotsMismatch, ErrConfig), whether it
// asks for slots or not, and whether the holder took slots or not.
func testSlotsMismatchRefused(t *testing.T, h Harness) {
	nm := name(t)
	s := open(t, h)
	l, err := acquireSlot(t, s, slotReq(nm, "three", 3, h), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 5} {
		_, err := acquireSlot(t, s, slotReq(nm, "other", n, h), 0)
		if !errors.Is(err, lease.ErrSlotsMismatch) || !errors.Is(err, lease.ErrConfig) {
			t.Errorf("--slots %d against a holder of 3 slots: %v; want ErrSlotsMismatch", n, err)
		}
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	plain := mustAcquire(t, s, heldReq(nm, "plain", h))
	if _, err := acquireSlot(t, s, slotReq(nm, "three", 3, h), 0); !errors.Is(err, lease.ErrSlotsMismatch) {
		t.Errorf("3 slots against a holder without slots: %v; want ErrSlotsMismatch", err)
	}
	if err := plain.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// testOneSlotIsPlain: one slot is the plain lease: the same name, label and
// record, and no slot of another name is written.
func testOneSlotIsPlain(t *testing.T, h Harness) {
	nm := name(t)
	s := open(t, h)
	l, err := acquireSlot(t, s, slotReq(nm, "one", 1, h), 0)
	if err != nil {
		t.Fatal(err)
	}
	info := l.Info()
	st, err := s.Status(ctxT(t), nm)
	if err != nil || st == nil || st.Label != "one" || st.Token != info.Token || info.Slots != 0 || info.Label != "one" {
		t.Fatalf("with 1 slot: Info() = %+v, Status = %+v, %v; want the plain lease held by one", info, st, err)
	}
	if st, err := s.Status(ctxT(t), lease.SlotName(nm, 1)); err != nil || st != nil {
		t.Fatalf("with 1 slot, slot 1 reads %+v, %v; want nothing", st, err)
	}
	hs, n, err := lease.SlotStatus(ctxT(t), s, nm, 0)
	if err != nil || n != 1 || len(hs) != 1 || hs[0].Label != "one" {
		t.Fatalf("SlotStatus of a plain lease = %+v, %d, %v", hs, n, err)
	}
	if err := l.Release(context.WithoutCancel(ctxT(t))); err != nil {
		t.Fatal(err)
	}
}

// testSlotStatusExact: SlotStatus, told nothing of the number of slots,
// finds every held slot: with slots 0 and 1 of 4 released (and, then, every
// slot but the last), the others are still reported held, with their
// number of slots. (It stopped after two free slots in a row: status said
// free while slots 2 and 3 ran.)
func testSlotStatusExact(t *testing.T, h Harness) {
	nm := name(t)
	s := open(t, h)
	const n = 4
	var ls []lease.Lease
	for k := range n {
		// Held unrenewed through up to eight reads: a TTL that no loaded
		// machine outlasts (the harness's shortest, 300ms on PostgreSQL,
		// expired slot 3 before its release beside the whole suite).
		r := slotReq(nm, fmt.Sprint("s", k), n, h)
		r.TTL = max(r.TTL, 20*time.Second)
		l, err := acquireSlot(t, s, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		if l.Info().Slot != k {
			t.Fatalf("acquisition %d took slot %d", k, l.Info().Slot)
		}
		ls = append(ls, l)
	}
	check := func(want ...int) {
		t.Helper()
		hs, got, err := lease.SlotStatus(ctxT(t), s, nm, 0)
		var slots []int
		for _, h := range hs {
			slots = append(slots, h.Slot)
			if h.Slots != n {
				t.Errorf("slot %d read with %d slots; want %d", h.Slot, h.Slots, n)
			}
		}
		if err != nil || got != n || fmt.Sprint(slots) != fmt.Sprint(want) {
			t.Fatalf("SlotStatus = slots %v of %d, %v; want %v of %d", slots, got, err, want, n)
		}
	}
	check(0, 1, 2, 3)
	for k, want := range [][]int{{1, 2, 3}, {2, 3}, {3}} {
		if err := ls[k].Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		check(want...)
	}
	if err := ls[n-1].Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if hs, got, err := lease.SlotStatus(ctxT(t), s, nm, 0); err != nil || len(hs) != 0 || got != 0 {
		t.Fatalf("SlotStatus with every slot free = %+v, %d, %v; want none", hs, got, err)
	}
}

// renewUntil renews l every interval until stop closes.
func renewUntil(t *testing.T, l lease.Lease, every time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := l.Renew(context.Background()); err != nil {
				t.Errorf("renewing slot %d: %v", l.Info().Slot, err)
				return
			}
		}
	}
}

// testSlotsListed: with slot 0 of a lease free, SlotStatus (told nothing
// of the number of slots) still finds its held slots, through the store's
// listing when it has one (lease.SlotLister), else by reading every slot
// that may exist. A store's listing names every slot it has an object for
// (held, or released: whether a released slot leaves one is the store's
// affair), nothing of a lease whose name has the first's as a prefix, and
// nothing for a name never used.
func testSlotsListed(t *testing.T, h Harness) {
	nm := name(t)
	s := open(t, h)
	const n = 6
	take := func(nm string, k, n int) lease.Lease {
		t.Helper()
		r := heldReq(lease.SlotName(nm, k), lease.SlotLabel("h", k, n), h)
		r.Slots = n
		l, err := s.TryAcquire(ctxT(t), r)
		if err != nil {
			t.Fatalf("take slot %d of %s: %v", k, nm, err)
		}
		return l
	}
	lister, lists := s.(lease.SlotLister)
	if lists {
		if ks, err := lister.ListSlots(ctxT(t), nm); err != nil || len(ks) != 0 {
			t.Fatalf("ListSlots of a lease never taken = %v, %v; want none", ks, err)
		}
	}
	take(nm, 2, n)
	five := take(nm, 5, n)
	take(nm+"x", 3, 4) // a lease whose name has nm as a prefix
	if err := five.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if lists {
		ks, err := lister.ListSlots(ctxT(t), nm)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(ks) || !slices.Contains(ks, 2) || slices.ContainsFunc(ks, func(k int) bool { return k != 2 && k != 5 }) {
			t.Fatalf("ListSlots = %v; want slot 2 (held) and at most slot 5 (released) besides, in order", ks)
		}
	}
	hs, got, err := lease.SlotStatus(ctxT(t), s, nm, 0)
	if err != nil || got != n || len(hs) != 1 || hs[0].Slot != 2 || hs[0].Slots != n {
		t.Fatalf("SlotStatus = %+v, %d, %v; want slot 2 of %d held", hs, got, err, n)
	}
}
