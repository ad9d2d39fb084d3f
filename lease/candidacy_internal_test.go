package lease

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// crowdRegistry answers every Join with a crowd of live candidates and
// reports each expiry asked for.
type crowdRegistry struct {
	live    int
	expiry  chan time.Duration
	timing  CandidateTiming
	leftIDs chan string
}

func (r *crowdRegistry) Join(_ context.Context, _ string, _ Candidate, expiry time.Duration) (int, error) {
	r.expiry <- expiry
	return r.live, nil
}
func (r *crowdRegistry) Leave(_ context.Context, _, id string) error { r.leftIDs <- id; return nil }
func (r *crowdRegistry) Candidates(context.Context, string) ([]Candidate, *Holder, error) {
	return nil, nil, nil
}
func (r *crowdRegistry) CandidateTiming() CandidateTiming { return r.timing }

// A standby that joins a crowd asks at once for the expiry of the interval
// it will refresh at: its first Join asked for one candidate's expiry (3 s),
// while its first refresh comes only after live/PerSecond (10 s with 30), so
// the registration lapsed in between and the takeover order went wrong.
func TestJoinCrowdAsksForTheRightExpiry(t *testing.T) {
	timing := CandidateTiming{Heartbeat: true, PerSecond: 3, MinInterval: time.Second, Step: 200 * time.Millisecond}
	r := &crowdRegistry{live: 30, expiry: make(chan time.Duration, 4), timing: timing, leftIDs: make(chan string, 1)}
	cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me"}, time.Minute, time.Second, 0, slog.New(slog.DiscardHandler))
	defer cd.leave(context.Background())
	first := <-r.expiry
	every, want := timing.HeartbeatEvery(r.live)
	select {
	case got := <-r.expiry:
		if got < want || got <= every {
			t.Fatalf("second Join asked for %v; want %v, beyond the %v until the first refresh", got, want, every)
		}
	case <-time.After(every / 2): // the refresh itself comes only after every
		t.Fatalf("after a first Join with expiry %v among %d candidates, no Join with a longer expiry before the first refresh in %v", first, r.live, every)
	}
}

// A standby behind the front of the line waits at least the front's turn
// (herdFront·δ) and at most that plus the time herdPerSecond looks take for
// every live candidate, never more than the TTL on top.
func TestSpreadIsBounded(t *testing.T) {
	step := 100 * time.Millisecond
	for _, tc := range []struct {
		live int64
		ttl  time.Duration
	}{{10, time.Minute}, {1000, time.Minute}, {1000, 2 * time.Second}, {1, time.Millisecond}} {
		cd := &candidacy{timing: CandidateTiming{Step: step}, ttl: tc.ttl}
		cd.live.Store(tc.live)
		window := min(time.Duration(tc.live)*time.Second/herdPerSecond, max(tc.ttl, step))
		lo, hi := herdFront*step, herdFront*step+window
		for range 1000 {
			if d := cd.spread(); d < lo || d > hi {
				t.Fatalf("live %d, ttl %v: spread %v outside [%v, %v]", tc.live, tc.ttl, d, lo, hi)
			}
		}
	}
}

// A registration whose remaining time no heartbeat could have asked for is
// dropped from the line; our own always stays.
func TestPlausibleDropsFarFutureRegistrations(t *testing.T) {
	timing := CandidateTiming{Heartbeat: true, PerSecond: 3, MinInterval: time.Second, Step: 200 * time.Millisecond}
	_, real := timing.HeartbeatEvery(3)
	// "slow" refreshes at the longest interval slow calls stretch it to.
	cs := []Candidate{{ID: "fake", Remaining: 365 * 24 * time.Hour}, {ID: "real", Remaining: real}, {ID: "slow", Remaining: timing.MaxExpiry(3)}, {ID: "me", Remaining: 365 * 24 * time.Hour}, {ID: "unknown"}}
	got := timing.plausible(cs, "me")
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	if want := []string{"real", "slow", "me", "unknown"}; !slices.Equal(ids, want) {
		t.Fatalf("kept %v, want %v", ids, want)
	}
	if got := (CandidateTiming{}).plausible(cs, "me"); len(got) != len(cs) {
		t.Fatalf("a registry without heartbeats dropped registrations: %+v", got)
	}
}

// unreadableRegistry fails every listing, as a store does whose
// connections and logins outlast the call timeout on a loaded host.
type unreadableRegistry struct{ crowdRegistry }

func (unreadableRegistry) Candidates(context.Context, string) ([]Candidate, *Holder, error) {
	return nil, nil, context.DeadlineExceeded
}

// A standby whose listing fails after a release holds back as its last
// known place says, not at all: beside stress-ng, the PostgreSQL standbys
// at priorities 5 and 0 both failed to list and both tried at once, and
// priority 0 took the lease first. The hold-back stays within the front's
// (herdFront−1)·δ, and a standby that knows no place, or has waited its
// spread, tries at once.
func TestUnreadListingHoldsBackByLastPlace(t *testing.T) {
	step := time.Second
	for _, tc := range []struct {
		pos  int64
		last bool
		want time.Duration
	}{
		{pos: -1, want: 0},
		{pos: 0, want: 0},
		{pos: 1, want: step},
		{pos: herdFront - 1, want: (herdFront - 1) * step},
		{pos: herdFront, want: 0},
		{pos: 1, last: true, want: 0},
	} {
		cd := &candidacy{reg: &unreadableRegistry{}, name: "n", timing: CandidateTiming{Step: step}, log: slog.New(slog.DiscardHandler)}
		cd.pos.Store(tc.pos)
		d, again, h := cd.turn(context.Background(), tc.last)
		if d != tc.want || again || h != nil {
			t.Errorf("last place %d (last %v), listing failed: turn = %v, again %v, holder %v; want %v, then try", tc.pos, tc.last, d, again, h, tc.want)
		}
	}
}

// connectingRegistry is a crowdRegistry whose connection is set up
// (Connect) apart from its calls; it reports each set-up's bound.
type connectingRegistry struct {
	crowdRegistry
	bounds chan time.Duration
}

func (r *connectingRegistry) Connect(ctx context.Context) error {
	dl, ok := ctx.Deadline()
	if !ok {
		r.bounds <- -1
	} else {
		r.bounds <- time.Until(dl)
	}
	return nil
}

// A heartbeat sets the registry's connection up within the heartbeat's
// interval, not the call timeout: a waiting standby holds no connection
// between checks on some stores, and a login slower than a call on a
// loaded store made its registration lapse.
func TestHeartbeatConnectsWithinInterval(t *testing.T) {
	timing := CandidateTiming{Heartbeat: true, MinInterval: 200 * time.Millisecond, Step: 10 * time.Millisecond}
	r := &connectingRegistry{crowdRegistry: crowdRegistry{live: 1, expiry: make(chan time.Duration, 16), timing: timing, leftIDs: make(chan string, 1)},
		bounds: make(chan time.Duration, 16)}
	const callTimeout = time.Millisecond
	cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me"}, time.Minute, callTimeout, 0, slog.New(slog.DiscardHandler))
	defer cd.leave(context.Background())
	<-r.expiry // the first Join, right after the attempt that found the lease held
	<-r.expiry // the heartbeat's Join: a set-up before it has reported its bound
	var b time.Duration
	select {
	case b = <-r.bounds:
	default:
		t.Fatal("a heartbeat joined without setting the connection up first")
	}
	if b <= callTimeout || b > timing.MinInterval {
		t.Fatalf("a heartbeat's set-up was bounded by %v; want more than the %v call timeout, at most the %v interval", b, callTimeout, timing.MinInterval)
	}
}

// slowListRegistry records when each Join starts, and answers a listing
// only when the call times out, as a loaded server does.
type slowListRegistry struct {
	crowdRegistry
	joins chan time.Time
}

func (r *slowListRegistry) Join(_ context.Context, _ string, _ Candidate, _ time.Duration) (int, error) {
	r.joins <- time.Now()
	return 1, nil
}

func (r *slowListRegistry) Candidates(ctx context.Context, _ string) ([]Candidate, *Holder, error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

// The first refresh comes an interval after the join started, not after
// the first listing ended: counted from the listing's end, a slow listing
// (the whole call timeout) pushed the refresh past the registration's
// expiry on a loaded Kubernetes API server, and the standby left the line
// while it waited.
func TestHeartbeatCountsFromTheJoin(t *testing.T) {
	const every = time.Second
	timing := CandidateTiming{Heartbeat: true, MinInterval: every, Step: 100 * time.Millisecond}
	r := &slowListRegistry{crowdRegistry: crowdRegistry{timing: timing, leftIDs: make(chan string, 1)}, joins: make(chan time.Time, 8)}
	cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me"}, time.Minute, every, 0, slog.New(slog.DiscardHandler))
	defer cd.leave(context.Background())
	first, second := <-r.joins, <-r.joins
	// Counted from the listing's end the gap is the listing's timeout
	// (every) plus the interval: 2s. From the join: the listing's end, 1s.
	if gap := second.Sub(first); gap >= every*3/2 {
		t.Fatalf("the first refresh came %v after the join; want about %v (the listing took the whole call timeout, %v)", gap, every, every)
	}
}

// lineRegistry lists a line in which the candidate "me" stands at the
// places given, one listing each (the last one for every listing after),
// and reports each listing.
type lineRegistry struct {
	crowdRegistry
	mu     sync.Mutex
	places []int
	listed chan int
}

func (r *lineRegistry) Candidates(context.Context, string) ([]Candidate, *Holder, error) {
	r.mu.Lock()
	pos := r.places[0]
	if len(r.places) > 1 {
		r.places = r.places[1:]
	}
	r.mu.Unlock()
	cs := make([]Candidate, 0, pos+1)
	for i := range pos {
		cs = append(cs, Candidate{ID: fmt.Sprint("before", i), Since: time.Unix(int64(i), 0)})
	}
	cs = append(cs, Candidate{ID: "me", Since: time.Unix(int64(pos), 0)})
	r.listed <- pos
	return cs, &Holder{Label: "h"}, nil
}

// With CandidateTiming.Relist a candidate lists again while it waits:
// behind the front of the line until a listing places it at the front (the
// front of a line of short jobs empties faster than the expiry comes, and
// a store whose standbys behind it sleep until the expiry, MySQL and
// PostgreSQL, left the lease free that long), and at the front too, since
// a place there goes stale: here a crowd's late joiner stands before it
// (place 5 after 1), and it learns so and goes behind, to come back to the
// front later. Without Relist it lists only once, when it joins.
func TestRelistWhileWaiting(t *testing.T) {
	for _, relist := range []bool{true, false} {
		timing := CandidateTiming{Heartbeat: true, PerSecond: 1000, MinInterval: time.Hour, Step: time.Millisecond, Relist: relist}
		places := []int{7, 5, herdFront, 1, 5, 0}
		r := &lineRegistry{crowdRegistry: crowdRegistry{live: 9, expiry: make(chan time.Duration, 16), timing: timing, leftIDs: make(chan string, 1)},
			places: slices.Clone(places), listed: make(chan int, 16)}
		var drain sync.WaitGroup
		drain.Go(func() {
			for range r.expiry {
			}
		})
		cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me", Since: time.Unix(100, 0)}, time.Minute, time.Second, 0, slog.New(slog.DiscardHandler))
		var seen []int
		// next waits for the next listing; one that never comes (a
		// candidate at the front that no longer lists) fails, not hangs.
		next := func() int {
			select {
			case p := <-r.listed:
				return p
			case <-time.After(30 * time.Second):
				t.Fatalf("relist %v: listings %v, then none in 30s", relist, seen)
				return 0
			}
		}
		want := places
		if !relist {
			want = want[:1]
		}
		for len(seen) < len(want) {
			seen = append(seen, next())
		}
		if relist {
			// At the front it still lists (the registry's last place
			// stands for every listing after).
			if p := next(); p != 0 {
				t.Fatalf("listings %v, then %d; want 0", seen, p)
			}
		}
		cd.leave(context.Background()) // waits for the goroutine, which recorded the last listing
		close(r.expiry)
		drain.Wait()
		if got := cd.pos.Load(); got != int64(want[len(want)-1]) {
			t.Fatalf("relist %v: place %d after listings %v", relist, got, seen)
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("relist %v: listings %v, want %v", relist, seen, want)
		}
		if !relist {
			select {
			case p := <-r.listed:
				t.Fatalf("listings %v, then another at %d; want none without Relist", seen, p)
			default:
			}
		}
	}
}

// relistEvery grows with the square of the distance from the front, so
// the candidates behind it list at most 0.65/δ times a second together,
// however many they are, and those at the front 3/25 of that after their
// first listing again: relistRate/δ in all.
func TestRelistEveryBoundsTheLine(t *testing.T) {
	step := 100 * time.Millisecond
	if got, want := relistEvery(herdFront, step, false), 4*step; got != want {
		t.Fatalf("just behind the front: %v, want %v", got, want)
	}
	if got, want := relistEvery(0, step, false), settleRelist*step; got != want {
		t.Fatalf("at the front, first: %v, want %v", got, want)
	}
	front := 0.0
	for pos := range herdFront {
		if got := relistEvery(pos, step, true); got < relistEvery(herdFront+2, step, true) {
			t.Fatalf("at the front (%d), settled: %v; want no sooner than two places behind the front", pos, got)
		}
		front += float64(time.Second) / float64(relistEvery(pos, step, true))
	}
	for _, n := range []int{10, 1000, 100000} {
		rate := front
		for pos := herdFront; pos < herdFront+n; pos++ {
			rate += float64(time.Second) / float64(relistEvery(pos, step, true))
		}
		if bound := relistRate * float64(time.Second) / float64(step); rate > bound {
			t.Fatalf("a line of %d behind the front lists %.2f times a second; want at most %.2f", n, rate, bound)
		}
	}
}

// timesRegistry records when each candidate's Joins came, and reports
// each candidate's first refresh (its second Join).
type timesRegistry struct {
	crowdRegistry
	mu        sync.Mutex
	joins     map[string][]time.Time
	refreshed chan time.Duration // from the join to the first refresh
}

func (r *timesRegistry) Join(_ context.Context, _ string, c Candidate, _ time.Duration) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.joins[c.ID] = append(r.joins[c.ID], time.Now())
	if ts := r.joins[c.ID]; len(ts) == 2 {
		r.refreshed <- ts[1].Sub(ts[0])
	}
	return r.live, nil
}

// A crowd that joined together refreshes apart: each wait is cut by a
// random part, so fifty standbys started by one script do not all connect
// to the store within the same second, interval after interval (on
// PostgreSQL they held twelve of twenty connections at once).
func TestCrowdRefreshesApart(t *testing.T) {
	const n = 10
	every := 400 * time.Millisecond
	r := &timesRegistry{crowdRegistry: crowdRegistry{live: 1, leftIDs: make(chan string, n),
		timing: CandidateTiming{Heartbeat: true, PerSecond: 1000, MinInterval: every, Step: time.Millisecond}},
		joins: map[string][]time.Time{}, refreshed: make(chan time.Duration, n)}
	for i := range n {
		cd := joinCandidates(context.Background(), r, "n", Candidate{ID: fmt.Sprint("c", i)}, time.Minute, time.Second, 0, slog.New(slog.DiscardHandler))
		defer cd.leave(context.Background())
	}
	first := make([]time.Duration, n)
	for i := range first {
		first[i] = <-r.refreshed
	}
	lo, hi := slices.Min(first), slices.Max(first)
	if hi-lo < every/10 {
		t.Fatalf("%d candidates that joined together first refreshed %v to %v after joining: within %v; want them spread over at least %v of the %v interval", n, lo, hi, hi-lo, every/10, every)
	}
	if lo < every/2 {
		t.Fatalf("a first refresh %v after joining; want no sooner than half the %v interval", lo, every)
	}
}

// With Relist, the listings of the line behind the front and the
// refreshes of every candidate each spend half of PerSecond, so that
// together they stay in the registry's budget (a PostgreSQL or MySQL
// login each).
func TestRelistStaysInBudget(t *testing.T) {
	for _, step := range []time.Duration{time.Millisecond, 250 * time.Millisecond, 2 * time.Second} {
		timing := CandidateTiming{Heartbeat: true, PerSecond: 3, MinInterval: time.Second, Step: step, Relist: true}
		listings := 0.0
		for pos := range herdFront + 100000 {
			listings += float64(time.Second) / float64(relistEvery(pos, timing.relistStep(), true))
		}
		if listings > timing.PerSecond/2 {
			t.Errorf("δ %v: the line lists %.2f times a second; want at most half of %v", step, listings, timing.PerSecond)
		}
		if timing.relistStep() < step {
			t.Errorf("δ %v: relisting steps %v, below δ", step, timing.relistStep())
		}
		const live = 300
		every, _ := timing.HeartbeatEvery(live)
		if refreshes := live * float64(time.Second) / float64(every); refreshes > timing.PerSecond/2+1e-9 {
			t.Errorf("δ %v: %d candidates refresh %.2f times a second; want at most half of %v", step, live, refreshes, timing.PerSecond)
		}
	}
}

// refusingRegistry grants a registration each Join, except the first that
// asks for more than one candidate's expiry, which it refuses; it reports
// each Join as the time the registration made before it ran out (zero:
// still live) and the expiry asked for.
type refusingRegistry struct {
	crowdRegistry
	mu      sync.Mutex
	until   time.Time
	refused bool
	joins   chan joinSeen
}

type joinSeen struct {
	lapsed time.Duration // how long the registration had been gone
	expiry time.Duration
	err    error
}

func (r *refusingRegistry) Join(_ context.Context, _ string, _ Candidate, expiry time.Duration) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	seen := joinSeen{expiry: expiry}
	if !r.until.IsZero() && now.After(r.until) {
		seen.lapsed = now.Sub(r.until)
	}
	_, one := r.timing.HeartbeatEvery(1)
	if expiry > one && !r.refused {
		r.refused, seen.err = true, fmt.Errorf("too many clients already")
	} else {
		r.until = now.Add(expiry)
	}
	r.joins <- seen
	return r.live, seen.err
}

// A refused Join for the crowd's longer expiry leaves the registration at
// the expiry the last granted Join asked for, so the refresh comes at that
// interval, not the crowd's: taking the crowd's interval all the same let
// the registration lapse until the crowd's refresh (here 10 to 20 s after
// the join, for an expiry of 3 s).
func TestRefusedGrowthKeepsTheInterval(t *testing.T) {
	timing := CandidateTiming{Heartbeat: true, PerSecond: 2, MinInterval: time.Second, Step: 50 * time.Millisecond}
	r := &refusingRegistry{crowdRegistry: crowdRegistry{live: 40, timing: timing, leftIDs: make(chan string, 1)}, joins: make(chan joinSeen, 16)}
	cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me"}, time.Minute, time.Second, 0, slog.New(slog.DiscardHandler))
	defer cd.leave(context.Background())
	var deadline <-chan time.Time // set once the growth was refused
	for grown := false; !grown; {
		select {
		case j := <-r.joins:
			if j.lapsed > 0 {
				t.Fatalf("a Join came %v after the registration ran out (a Join for the crowd's expiry had been refused)", j.lapsed)
			}
			if j.err != nil {
				r.mu.Lock()
				// A loaded machine's slack: still far before the crowd's
				// interval (20 s), which the old code refreshed at.
				deadline = time.After(time.Until(r.until) + 5*timing.MinInterval)
				r.mu.Unlock()
			}
			grown = j.err == nil && j.expiry > 3*timing.MinInterval
		case <-deadline:
			t.Fatal("no Join before the registration ran out, after a Join for the crowd's expiry was refused")
		}
	}
}

// The Join that asks for a crowd's longer expiry sets the connection up
// first, as a heartbeat does: the Join before it left none (a waiting
// standby keeps none), and a login within the call timeout failed on a
// loaded server, every time the crowd grew.
func TestGrowthConnectsFirst(t *testing.T) {
	timing := CandidateTiming{Heartbeat: true, PerSecond: 2, MinInterval: time.Second, Step: 10 * time.Millisecond}
	r := &connectingRegistry{crowdRegistry: crowdRegistry{live: 40, expiry: make(chan time.Duration, 16), timing: timing, leftIDs: make(chan string, 1)},
		bounds: make(chan time.Duration, 16)}
	const callTimeout = time.Millisecond
	cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me"}, time.Minute, callTimeout, 0, slog.New(slog.DiscardHandler))
	defer cd.leave(context.Background())
	<-r.expiry      // the first Join, for one candidate's expiry
	e := <-r.expiry // the Join for the crowd's: a set-up before it has reported its bound
	select {
	case b := <-r.bounds:
		if b <= callTimeout {
			t.Fatalf("the set-up before the crowd's Join was bounded by %v, the %v call timeout", b, callTimeout)
		}
	default:
		t.Fatalf("the Join for the crowd's expiry (%v) came without setting the connection up first", e)
	}
	if e <= 3*timing.MinInterval {
		t.Fatalf("the Join after the set-up asked for %v; want the crowd's expiry", e)
	}
}

// Slow calls space a line's refreshes and listings out so that about
// callsInFlight of them are in flight at once (Little's law: calls a
// second times a call's time), however long a call takes, up to
// maxStretch; calls as fast as a quiet host's leave the intervals as the
// budget makes them, and so does a line short enough that the minimum
// interval paces it (its dead standbys lapse in the documented time).
func TestStretchKeepsCallsInFlight(t *testing.T) {
	for _, relist := range []bool{false, true} {
		timing := CandidateTiming{Heartbeat: true, PerSecond: 3, MinInterval: 5 * time.Second, Step: 250 * time.Millisecond, Relist: relist}
		share := callsInFlight
		if relist {
			share /= 2
		}
		for _, live := range []int{1, 10, 50, 200} {
			every, _ := timing.HeartbeatEvery(live)
			for _, took := range []time.Duration{0, 20 * time.Millisecond, 300 * time.Millisecond, time.Second, 3 * time.Second, time.Minute} {
				got := timing.stretch(every, int64(live), took)
				if every <= timing.MinInterval && got != every {
					t.Fatalf("relist %v, %d live, calls of %v: interval %v; want %v, the minimum interval, which paces so short a line", relist, live, took, got, every)
				}
				if got < every || got > maxStretch*every {
					t.Fatalf("relist %v, %d live, calls of %v: interval %v, outside [%v, %v]", relist, live, took, got, every, maxStretch*every)
				}
				inFlight := float64(live) * took.Seconds() / got.Seconds()
				if every > timing.MinInterval && got < maxStretch*every && inFlight > share*1.001 {
					t.Errorf("relist %v, %d live, calls of %v: refreshing every %v keeps %.2f calls in flight; want at most %.2f", relist, live, took, got, inFlight, share)
				}
				if float64(live)*took.Seconds()/every.Seconds() <= share && got != every {
					t.Errorf("relist %v, %d live, calls of %v: interval %v, want the budget's %v (the calls are fast enough)", relist, live, took, got, every)
				}
			}
		}
	}
	step := CandidateTiming{PerSecond: 3, Step: 250 * time.Millisecond, Relist: true}.relistStep()
	for _, took := range []time.Duration{0, 20 * time.Millisecond, 300 * time.Millisecond, time.Second, time.Minute} {
		got := stretchStep(step, took)
		if got < step || got > maxStretch*step {
			t.Fatalf("listings of %v: step %v, outside [%v, %v]", took, got, step, maxStretch*step)
		}
		// The whole line lists relistRate times a step (TestRelistEveryBoundsTheLine).
		if inFlight := relistRate * took.Seconds() / got.Seconds(); got < maxStretch*step && inFlight > callsInFlight/2*1.001 {
			t.Errorf("listings of %v: a step of %v keeps %.2f in flight; want at most %.2f", took, got, inFlight, callsInFlight/2)
		}
	}
}

// slowRegistry is a crowd whose every Join takes at least took (a login
// and a statement on a loaded server), reporting each Join's expiry and times.
type slowRegistry struct {
	crowdRegistry
	took  time.Duration
	joins chan slowJoin
}

type slowJoin struct {
	expiry time.Duration
	at     time.Time // when the Join began
	end    time.Time // when it was about to return (no later than its return)
}

func (r *slowRegistry) Join(_ context.Context, _ string, _ Candidate, expiry time.Duration) (int, error) {
	at := time.Now()
	time.Sleep(r.took) // the call's own time, not a wait for another goroutine
	r.joins <- slowJoin{expiry, at, time.Now()}
	return r.live, nil
}

// A standby whose Joins are slow asks for the expiry of the stretched
// interval, which it then refreshes at (a crowd of twenty whose calls took
// a second each would otherwise keep some of them in flight at all times),
// and never beyond MaxExpiry, which the other standbys accept. A refresh's
// interval counts from a moment the registry cannot see (the start of the
// refresh before it), but that moment comes after the Join before that
// one returned: so Join i begins at least the stretched interval, less its
// random cut (a quarter), after Join i-2 ended. A loaded machine only
// makes it later.
func TestSlowJoinsStretchTheRefresh(t *testing.T) {
	timing := CandidateTiming{Heartbeat: true, PerSecond: 100, MinInterval: 50 * time.Millisecond, Step: 10 * time.Millisecond}
	r := &slowRegistry{crowdRegistry: crowdRegistry{live: 20, timing: timing, leftIDs: make(chan string, 1)}, took: 100 * time.Millisecond, joins: make(chan slowJoin, 16)}
	cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me"}, time.Minute, time.Minute, 0, slog.New(slog.DiscardHandler))
	defer cd.leave(context.Background())
	every, _ := timing.HeartbeatEvery(r.live)
	// At least the calls' time: more on a loaded machine, never past the cap.
	stretched := min(maxStretch*every, time.Duration(float64(r.live)*float64(r.took)/callsInFlight))
	if stretched <= every {
		t.Fatalf("the test's calls (%v) are too fast to stretch %v", r.took, every)
	}
	var joins []slowJoin
	for i := range 5 {
		j := <-r.joins
		joins = append(joins, j)
		if i >= 3 {
			if gap, least := j.at.Sub(joins[i-2].end), stretched-stretched/4; gap < least {
				t.Fatalf("Join %d began %v after Join %d ended; want %v or more (refreshes at the stretched interval %v)", i, gap, i-2, least, stretched)
			}
		}
		if j.expiry > timing.MaxExpiry(r.live) {
			t.Fatalf("Join %d asked for %v, beyond MaxExpiry %v", i, j.expiry, timing.MaxExpiry(r.live))
		}
		// Join 0 is the first (one candidate's expiry), Join 1 the
		// crowd's, asked for at once; each later one is a refresh.
		if i >= 1 && j.expiry < 3*stretched {
			t.Fatalf("Join %d asked for %v; want the stretched interval's %v (calls of %v or more, %d live)", i, j.expiry, 3*stretched, r.took, r.live)
		}
	}
}
