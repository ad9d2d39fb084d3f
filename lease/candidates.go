package lease

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Candidate is a waiting instance registered as a standby for a lease.
type Candidate struct {
	// ID identifies the candidacy: the acquisition ID (Request.ID) of the
	// waiting Acquire call. Status output leaves it out.
	ID string `json:"id,omitempty"`
	// Label is the instance's human label (Request.Label).
	Label string `json:"holder"`
	// Priority ranks candidates: when the lease becomes free, the live
	// candidate with the highest priority tries first (AcquireOptions.Priority).
	Priority int `json:"priority"`
	// Since is the wall-clock time the candidate started to wait, for display
	// and as the order among equal priorities.
	Since time.Time `json:"since"`
	// Remaining is how long the registration stays live without another
	// refresh, when the store can tell (Candidates only); 0 means unknown or
	// not applicable (the file store's candidates live as long as their
	// process).
	Remaining time.Duration `json:"-"`
}

// CandidateTiming is how a CandidateRegistry wants to be used.
type CandidateTiming struct {
	// Heartbeat is true when a registration lapses unless it is refreshed
	// (Redis, Azure); false when the store sees for itself whether a
	// candidate lives (the file store: a lock its process holds).
	Heartbeat bool
	// PerSecond is how many store calls per second all live candidates of
	// one lease together may make to keep their registrations (and, with
	// Relist, their places); each candidate refreshes every live/PerSecond
	// (live/(PerSecond/2) with Relist), at least every MinInterval, less a
	// random part of up to a quarter (heartbeat), so a crowd makes at most
	// a third more.
	PerSecond float64
	// MinInterval is the shortest refresh interval.
	MinInterval time.Duration
	// Step is δ: how long a better-ranked live candidate may need, after the
	// lease became free, to notice and try for it. A candidate with k live
	// candidates ranked above it holds back k·Step.
	Step time.Duration
	// Relist is true when the store's waiters behind the front of the line
	// sleep until a listing places them at the front (PostgreSQL's hold no
	// LISTEN connection, MySQL's read nothing) or the lease's expiry comes:
	// a candidate behind the front then lists again every relistEvery, so
	// that a front emptied by short jobs is filled again before the
	// expiry. Used with Heartbeat. The listings spend the same budget as
	// the refreshes: each takes half of PerSecond.
	Relist bool
}

// relistRate is how many times a step all candidates of a line list
// together (relistEvery): Σ 1/(k+2)² for k ≥ 0 (π²/6 - 1) behind the
// front, and herdFront/frontRelist at the front.
const relistRate = 0.645 + float64(herdFront)/frontRelist // 0.645: rounded up

// frontRelist is how many steps a candidate at the front of the line waits
// before it lists again, after its first time (settleRelist): (herdFront+2)²,
// as far apart as the listings of a candidate two places behind the front's
// last. A place at the front goes stale too: a standby with an earlier
// start that joined after this one listed (a crowd started together, in
// which a slow login came later), or one of higher priority, stands before
// it. Left alone, fifty standbys started at once had seven that believed
// they were at the front, each keeping a LISTEN connection where three
// may (PostgreSQL, max_connections=20, at load: seven connections kept),
// and a release would start seven at once.
const frontRelist = (herdFront + 2) * (herdFront + 2)

// settleRelist is how many steps a candidate at the front waits before its
// first listing again: soon, since a crowd's late joiners are the likeliest
// to stand before it, and they join within seconds.
const settleRelist = 4

// budget is the part of PerSecond the refreshes may spend: all of it, or
// half when listings (Relist) spend the other half.
func (t CandidateTiming) budget() float64 {
	if t.Relist {
		return t.PerSecond / 2
	}
	return t.PerSecond
}

// relistStep is the step of relistEvery: δ, or longer when the listings
// of the whole line at δ would spend more than their half of PerSecond
// (PostgreSQL's δ of 250 ms made 2.6 listings a second, each a connection
// and a login, on top of 3 refreshes: fifty waiting standbys held twelve
// of twenty connections at once on a loaded host).
func (t CandidateTiming) relistStep() time.Duration {
	if t.PerSecond <= 0 {
		return t.Step
	}
	return max(t.Step, time.Duration(relistRate/(t.PerSecond/2)*float64(time.Second)))
}

// relistEvery is how long a candidate at pos, behind the front of the
// line, waits before it lists again (CandidateTiming.Relist): step (δ)
// times (pos-herdFront+2)², so 4·δ just behind the front, 9·δ one further
// back, 16·δ the next. The candidates behind the front then list at most
// (π²/6 - 1)/δ ≈ 0.65/δ times a second together, however many they are:
// a bounded cost, where a fixed interval would grow with the fleet. The
// step is CandidateTiming.relistStep: δ, or longer to keep that cost in
// the registry's budget.
//
// Without it, a line of short jobs emptied its front faster than the
// expiry came: the front's three took the lease one after another within
// a second, while the standbys behind them, the only ones left, slept
// until the expiry they had read (up to a TTL) and then their spread
// before they listed and learnt they were at the front (MySQL, 20
// contenders of 200 ms jobs beside stress-ng: a handover's median was
// 167 ms, its p95 3.4 s).
//
// A candidate at the front (or whose place is not known) lists again too:
// settleRelist steps after it began to heartbeat (settled false), then
// every frontRelist steps.
func relistEvery(pos int, step time.Duration, settled bool) time.Duration {
	switch {
	case pos < herdFront && !settled:
		return settleRelist * step
	case pos < herdFront:
		return frontRelist * step
	}
	k := time.Duration(pos - herdFront + 2)
	return k * k * step
}

// HeartbeatEvery returns the refresh interval for live candidates and the
// expiry each refresh asks for (three intervals: two refreshes may be lost
// before a live candidate is dropped). A candidate whose calls are slow
// refreshes less often, up to maxStretch times this interval (stretch).
func (t CandidateTiming) HeartbeatEvery(live int) (every, expiry time.Duration) {
	every = t.MinInterval
	if t.PerSecond > 0 {
		every = max(every, time.Duration(float64(live)/t.budget()*float64(time.Second)))
	}
	return every, 3 * every
}

// MaxExpiry is the longest expiry a live candidate's refresh asks for when
// live candidates wait: that of its slowest interval (maxStretch times
// HeartbeatEvery's). A registration with more time left than that, a
// second more for the clocks and a call in flight, is none a live standby
// made (plausible).
func (t CandidateTiming) MaxExpiry(live int) time.Duration {
	_, expiry := t.HeartbeatEvery(live)
	return maxStretch * expiry
}

// callsInFlight is how many registry calls all the candidates of a line
// together may have in flight at once, on average: refreshes and listings
// (with Relist) half each. A call is counted from the start of its
// connection set-up to its end (on PostgreSQL a connection, a login, a
// statement and a goodbye). The PerSecond budget alone bounds the calls a
// second, not the calls at once: on a loaded host, where a login and a
// statement took a second or two, fifty PostgreSQL standbys beside
// stress-ng held six connections at once for their refreshes and listings
// (the leader's and the front's LISTEN ones on top), where the same
// calls a second held one or two on a quiet host.
const callsInFlight = 1.0

// maxStretch bounds how much slower than its budget a candidate refreshes
// and lists when its calls are slow (stretch, stretchStep): a registration
// then lasts at most maxStretch times as long after its standby died
// (MaxExpiry), and the line moves up at worst that much later.
const maxStretch = 4

// stretch returns the refresh interval for live candidates whose registry
// calls take took each: every (HeartbeatEvery's), or longer, so that the
// line's refreshes together keep their share of callsInFlight in flight
// (live·took/interval), at most maxStretch·every. A line short enough that
// MinInterval paces it, not the budget, keeps every: it calls less than
// its budget, a few candidates can keep only a few calls in flight, and a
// dead standby leaves the list in the time documented (three
// MinIntervals).
func (t CandidateTiming) stretch(every time.Duration, live int64, took time.Duration) time.Duration {
	if every <= t.MinInterval {
		return every
	}
	share := callsInFlight
	if t.Relist {
		share /= 2
	}
	want := time.Duration(float64(max(live, 1)) * float64(took) / share)
	return min(maxStretch*every, max(every, want))
}

// stretchStep returns the step of relistEvery for listings that take took
// each: step, or longer, so that the listings of the whole line
// (relistRate a step) keep their half of callsInFlight in flight, at most
// maxStretch·step.
func stretchStep(step, took time.Duration) time.Duration {
	want := time.Duration(relistRate * float64(took) / (callsInFlight / 2))
	return min(maxStretch*step, max(step, want))
}

// CandidateRegistry is part of every Store: a list of the
// instances waiting for a lease, used to order takeovers and to show
// standbys. It is never needed for safety: exclusion rests on TryAcquire
// alone, and every registry failure only costs ordering (Acquire then behaves
// as if all candidates had equal priority).
type CandidateRegistry interface {
	// Join registers c as a live candidate for the lease name, or refreshes
	// its registration, so that it stays live for at least expiry (stores
	// whose CandidateTiming.Heartbeat is false ignore expiry). It returns how
	// many candidates are live, c included.
	Join(ctx context.Context, name string, c Candidate, expiry time.Duration) (live int, err error)
	// Leave removes the candidate id of name. Leaving a candidacy that is
	// not registered is not an error. A store may finish the removal after
	// Leave returns (Redis does, so that a new leader's child does not wait
	// for it); it then finishes before the store's Close returns.
	Leave(ctx context.Context, name, id string) error
	// Candidates returns the live candidates of name in takeover order
	// (SortCandidates) and the current holder (nil when the lease looks
	// free), read together in one store call where the store allows. The
	// holder is a hint: only TryAcquire decides.
	Candidates(ctx context.Context, name string) ([]Candidate, *Holder, error)
	// CandidateTiming returns the registry's refresh budget and δ.
	CandidateTiming() CandidateTiming
}

// SortCandidates puts cs in takeover order: higher priority first, then the
// longest waiting, then by ID.
func SortCandidates(cs []Candidate) {
	slices.SortFunc(cs, func(a, b Candidate) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// The release herd. When a lease becomes free, every standby may wake at
// once. Only the front of the line, the first herdFront candidates in
// takeover order, looks and tries at once (position p after p·δ, so the
// first in line is never slowed); a standby further back first waits
// herdFront·δ and a random share of a spread, then looks again and tries only
// if the lease is still free. The burst after a release is therefore about
// herdFront tries plus herdPerSecond looks per second, whatever the number
// of standbys, and a front made of dead or frozen candidates delays the
// takeover by at most herdFront·δ plus the spread, which never exceeds the
// lease's TTL.
const (
	// herdFront is how many candidates at the front of the line try at once.
	herdFront = 3
	// herdPerSecond is how many looks per second the standbys behind the
	// front make together after a release.
	herdPerSecond = 20
)

// plausible drops registrations no live standby could have made: one whose
// remaining time exceeds the longest expiry a heartbeat asks for when twice
// as many candidates are live (MaxExpiry; a registration written by hand, or by a buggy or
// hostile client, to sit at the front of the line for ever). Stores that
// cannot tell the remaining time (0: etcd, whose registrations live on
// etcd leases) keep every registration; so does a registry without
// heartbeats (the file store: a registration is a lock its process holds).
func (t CandidateTiming) plausible(cs []Candidate, self string) []Candidate {
	if !t.Heartbeat {
		return cs
	}
	bound := t.MaxExpiry(2*len(cs)+2) + time.Second // the store's clock against ours, and a call in flight
	out := cs[:0:0]
	for _, c := range cs {
		if c.ID == self || c.Remaining <= bound {
			out = append(out, c)
		}
	}
	return out
}

// position returns how many candidates of cs come before c in takeover
// order: c's index in cs (which is in takeover order), or, when c is not
// listed (its registration lapsed or was not made yet), the number of
// candidates that would sort before it.
func position(cs []Candidate, c Candidate) int {
	for i, x := range cs {
		if x.ID == c.ID {
			return i
		}
	}
	n := 0
	for _, x := range cs {
		if x.Priority > c.Priority || x.Priority == c.Priority && x.Since.Before(c.Since) {
			n++
		}
	}
	return n
}

// candidacy is one Acquire call's registration as a standby: Join, a
// heartbeat goroutine while the registry needs one, and Leave at the end.
type candidacy struct {
	reg     CandidateRegistry
	name    string
	c       Candidate
	timing  CandidateTiming
	timeout time.Duration
	log     *slog.Logger
	// ttl bounds the spread of a standby behind the front of the line.
	ttl time.Duration
	// anySlot: the lease has slots, so the holder a listing reports (slot
	// 0's) does not mean the lease is taken.
	anySlot bool

	// pos and live are the candidate's place in the line and the number of
	// live candidates as last seen (a listing, or the count Join returned:
	// a new candidate is at the back), -1 until known; placed is true once
	// a listing told them. mu orders the writers.
	pos, live atomic.Int64
	placed    atomic.Bool
	mu        sync.Mutex
	// took is how long the registry's calls take (observe), in
	// nanoseconds: refreshes and listings space themselves by it.
	took atomic.Int64

	stop chan struct{}
	wg   sync.WaitGroup
}

// joinCandidates registers c and, for a registry that needs heartbeats,
// keeps refreshing it, from a goroutine it starts (so the caller goes on to
// wait at once: joining is not on the way to the lease); leave ends it. A
// failed Join is logged and the heartbeat keeps trying: the registry only
// orders takeovers.
func joinCandidates(ctx context.Context, reg CandidateRegistry, name string, c Candidate, ttl, timeout, step time.Duration, log *slog.Logger) *candidacy {
	cd := &candidacy{reg: reg, name: name, c: c, timing: reg.CandidateTiming(), ttl: ttl, timeout: timeout, log: log, stop: make(chan struct{})}
	if step > 0 {
		cd.timing.Step = step // AcquireOptions.PriorityStep
	}
	cd.pos.Store(-1)
	cd.live.Store(-1)
	cd.wg.Add(1)
	go func() {
		defer cd.wg.Done()
		select {
		case <-cd.stop:
			return // the wait ended before it began
		default:
		}
		every, expiry := cd.timing.HeartbeatEvery(1)
		joined := time.Now()
		gap := every // the wait until the first refresh
		live, err := cd.join(ctx, expiry)
		cd.observe(time.Since(joined))
		if err == nil {
			// Until a listing says otherwise, a newcomer is at the back.
			cd.estimate(live)
			if cd.timing.Heartbeat {
				// A crowd is waiting: the first refresh comes only after
				// the crowd's interval, later than the expiry asked for
				// one candidate, so ask at once for the expiry of that
				// interval (else the registration lapsed before its first
				// refresh).
				every, gap = cd.grow(ctx, every, every, live)
			}
			// Where we stand: one listing, while the lease is held, so that
			// the release finds every standby knowing whether it is at the
			// front of the line (a crowd that started together, or a
			// standby of higher priority than those before it, cannot tell
			// from the count). A crowd spreads these listings at
			// herdPerSecond, so that starting a thousand standbys does not
			// make the store read a million registrations at once.
			if !cd.sleep(ctx, rand.N(time.Duration(live)*time.Second/herdPerSecond+1)) {
				return
			}
			cd.place(ctx)
		}
		if cd.timing.Heartbeat {
			cd.heartbeat(ctx, every, gap, live, joined)
		}
	}()
	return cd
}

func (cd *candidacy) join(ctx context.Context, expiry time.Duration) (int, error) {
	cctx, cancel := cd.callCtx(ctx)
	defer cancel()
	live, err := cd.reg.Join(cctx, cd.name, cd.c, expiry)
	if err != nil {
		cd.log.Debug("registering as a standby failed; takeover order may be off", "lease", cd.name, "err", err)
	}
	return live, err
}

func (cd *candidacy) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if cd.timeout > 0 {
		return context.WithTimeout(ctx, cd.timeout)
	}
	return context.WithCancel(ctx)
}

// heartbeat refreshes the registration every interval from the start of
// the last refresh (last), the interval following the number of live
// candidates so that all of them together stay within the registry's
// budget. Counting from the start, not the end, keeps the time a refresh
// or the first listing took from delaying the next: on a loaded
// Kubernetes API server the first refresh came after the join's, the
// listing's and the set-up's time on top of the interval, past the
// registration's expiry, and the standby left the line while it waited.
//
// With CandidateTiming.Relist, a candidate also lists again every
// relistEvery its place (relist): often behind the front, seldom at it.
//
// Each wait is cut by a random part (sooner), of up to half the interval
// for the first refresh and a quarter after: a crowd started together (a
// fleet's units at boot, fifty processes from one script) joined within a
// second and, refreshing on the same interval, kept doing it within that
// second, each refresh a connection and a login on PostgreSQL: fifty
// standbys held twelve connections at once (max_connections=20) where
// spread out they held a few.
//
// Slow calls space both out further (stretch, stretchStep), so that the
// line keeps about callsInFlight calls in flight however long a call
// takes. every is the crowd's interval (HeartbeatEvery) for live
// candidates, as the last Join counted them; gap, the wait
// until the next refresh, is every stretched, as far as the expiry the
// last granted Join asked for allows: a refresh that finds the calls
// slower asks for the longer expiry first, and waits longer only after.
func (cd *candidacy) heartbeat(ctx context.Context, every, gap time.Duration, live int, last time.Time) {
	listed, settled := time.Now(), false
	beatCut, listCut := sooner(2), sooner(4)
	for {
		due, relist := last.Add(gap-time.Duration(beatCut*float64(gap))), false
		if cd.timing.Relist {
			step := stretchStep(cd.timing.relistStep(), cd.callTime())
			lgap := relistEvery(int(cd.pos.Load()), step, settled)
			if at := listed.Add(lgap - time.Duration(listCut*float64(lgap))); at.Before(due) {
				due, relist = at, true
			}
		}
		t := time.NewTimer(time.Until(due))
		select {
		case <-cd.stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if relist {
			settled = settled || !cd.behind()
			listed, listCut = time.Now(), sooner(4)
			cd.relist(ctx)
			cd.observe(time.Since(listed))
			continue
		}
		last, beatCut = time.Now(), sooner(4)
		ask := cd.timing.stretch(every, int64(live), cd.callTime())
		cd.connect(ctx, every/2)
		n, err := cd.join(ctx, 3*ask)
		cd.observe(time.Since(last))
		if err == nil {
			live = n
			every, gap = cd.grow(ctx, every, ask, live)
		}
	}
}

// observe records that a registry call (its connection set-up included)
// took d: the estimate rises at once to a slower call and comes down by
// half the difference with each faster one, so that one quick call on a
// loaded host does not undo the spacing.
func (cd *candidacy) observe(d time.Duration) {
	old := time.Duration(cd.took.Load())
	cd.took.Store(int64(max(d, (old+d)/2)))
}

// callTime is how long the registry's calls take, as last observed.
func (cd *candidacy) callTime() time.Duration { return time.Duration(cd.took.Load()) }

// grow is called after a Join that asked for the expiry of the interval
// asked (every, the crowd's interval, stretched by the calls' time) found
// live candidates waiting. It returns next, the crowd's interval from now
// on: live's (HeartbeatEvery) once a Join has granted its expiry (asked
// for here when it is longer), else every; and gap, the wait until the
// next refresh: next stretched by the calls' time, at most the interval
// whose expiry a granted Join asked for. A registration must outlive the
// wait until its refresh: a standby that took the longer interval although
// its Join for the longer expiry failed (53300, from a PostgreSQL server
// whose connections a fleet's logins had filled) left the line when the
// short expiry ran out and came back only at the longer interval's
// refresh, tens of seconds later. Meanwhile every standby behind it stood
// one place too far forward, and those that thought themselves at the
// front each kept a LISTEN connection.
func (cd *candidacy) grow(ctx context.Context, every, asked time.Duration, live int) (next, gap time.Duration) {
	next, _ = cd.timing.HeartbeatEvery(live)
	if want := cd.timing.stretch(next, int64(live), cd.callTime()); next > every && want > asked {
		// A Connector's connection went with the Join before (a waiting
		// standby keeps none): set it up as a refresh does, within half
		// the interval, not the call timeout, which a login on a loaded
		// server outlasts.
		start := time.Now()
		cd.connect(ctx, every/2)
		_, err := cd.join(ctx, 3*want)
		cd.observe(time.Since(start))
		if err != nil {
			return every, min(cd.timing.stretch(every, int64(live), cd.callTime()), asked)
		}
		asked = want
	}
	return next, min(cd.timing.stretch(next, int64(live), cd.callTime()), asked)
}

// sooner returns the part of an interval (from 0 up to 1/div) by which a
// wait is cut, at random, so that waits started together end apart.
func sooner(div float64) float64 { return rand.Float64() / div }

// leaveSetup bounds the connection set-up of leave: an exit waits that
// long at most for a store that does not answer.
const leaveSetup = 5 * time.Second

// connect sets up the registry's connection (a Connector registry: a
// waiting standby may hold none between checks) within d (half the
// interval), not the call timeout: the registration made a heartbeat ago
// lasts two more, and a slow set-up on a loaded store must not make it
// lapse. A failure is left to the join that follows.
func (cd *candidacy) connect(ctx context.Context, d time.Duration) {
	c, ok := cd.reg.(Connector)
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_ = c.Connect(cctx)
}

// relist lists the candidates and records where this one stands: the
// store's Wait learns it from the listing too, and a candidate now at the
// front stops sleeping. A failed listing leaves the last place.
func (cd *candidacy) relist(ctx context.Context) {
	cd.connect(ctx, cd.timing.Step)
	cctx, cancel := cd.callCtx(ctx)
	defer cancel()
	cs, _, err := cd.reg.Candidates(cctx, cd.name)
	if err != nil {
		cd.log.Debug("reading the standbys failed; keeping the last known place in line", "lease", cd.name, "err", err)
		return
	}
	cs = cd.timing.plausible(cs, cd.c.ID)
	cd.mu.Lock()
	defer cd.mu.Unlock()
	cd.record(position(cs, cd.c), len(cs))
}

// place lists the candidates and records where this one stands, unless a
// listing after a wake-up already did; a failed listing leaves it unknown
// (the front: it looks at once when woken).
func (cd *candidacy) place(ctx context.Context) {
	if cd.placed.Load() {
		return
	}
	cd.connect(ctx, cd.timing.MinInterval) // within the first refresh's interval
	cctx, cancel := cd.callCtx(ctx)
	defer cancel()
	cs, _, err := cd.reg.Candidates(cctx, cd.name)
	if err != nil {
		return
	}
	cs = cd.timing.plausible(cs, cd.c.ID)
	cd.mu.Lock()
	defer cd.mu.Unlock()
	if !cd.placed.Load() {
		cd.record(position(cs, cd.c), len(cs))
	}
}

// estimate records the place Join's count suggests (the back of the line)
// unless a listing has already told the real one.
func (cd *candidacy) estimate(live int) {
	cd.mu.Lock()
	defer cd.mu.Unlock()
	if !cd.placed.Load() {
		cd.pos.Store(int64(live - 1))
		cd.live.Store(int64(live))
	}
}

// record stores a place a listing told; cd.mu is held.
func (cd *candidacy) record(pos, live int) {
	cd.pos.Store(int64(pos))
	cd.live.Store(int64(live))
	cd.placed.Store(true)
}

// sleep waits d, and reports false when the candidacy ended first.
func (cd *candidacy) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-cd.stop:
		return false
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// behind reports whether the candidate was behind the front of the line
// when it last looked: it then waits its spread before it even lists, so
// that a release does not make every standby read the registry at once.
func (cd *candidacy) behind() bool { return cd.pos.Load() >= herdFront }

// spread returns how long a standby behind the front waits before it looks:
// herdFront·δ, for the front to take the lease, and a random share of the
// time herdPerSecond looks take for all live candidates, at most the TTL.
func (cd *candidacy) spread() time.Duration {
	live := max(cd.live.Load(), 1)
	window := min(time.Duration(live)*time.Second/herdPerSecond, max(cd.ttl, cd.timing.Step))
	return herdFront*cd.timing.Step + rand.N(window+1)
}

// turn lists the candidates and says what this candidate does next: wait d
// and then try (again false), or wait d and then look again (again true).
// holder is the holder the listing saw (nil: the lease looked free); the
// caller then waits for it instead. When the registry cannot be read, the
// candidate waits the hold-back of its last known place and tries
// (lastTurn). With last (the candidate has already waited its spread) it
// never looks again.
func (cd *candidacy) turn(ctx context.Context, last bool) (d time.Duration, again bool, holder *Holder) {
	// The connection first, as Acquire's attempt would set it up anyway: a
	// standby that holds none while it waits (PostgreSQL's behind the
	// front) spent the call timeout logging in on a loaded server, failed
	// to list, and tried without its hold-back, out of turn. Within δ: a
	// standby that cannot connect in that time has lost its turn anyway,
	// and a longer set-up (15s, on a stalled Azurite) let the standbys
	// behind it take the lease while it waited.
	cd.connect(ctx, cd.timing.Step)
	cctx, cancel := cd.callCtx(ctx)
	defer cancel()
	cs, h, err := cd.reg.Candidates(cctx, cd.name)
	if err != nil {
		d := cd.lastTurn(last)
		cd.log.Debug("reading the standbys failed; trying for the lease after the hold-back of the last known place in line", "lease", cd.name, "hold_back", d, "err", err)
		return d, false, nil
	}
	cs = cd.timing.plausible(cs, cd.c.ID)
	p := position(cs, cd.c)
	cd.mu.Lock()
	cd.record(p, len(cs))
	cd.mu.Unlock()
	switch {
	case h != nil && !cd.anySlot:
		return 0, false, h
	case p < herdFront:
		return time.Duration(p) * cd.timing.Step, false, nil
	case last:
		return 0, false, nil
	}
	return cd.spread(), true, nil
}

// lastTurn is turn's hold-back when the registry could not be read: that
// of the place in line last seen (p·δ at the front; nothing once the spread
// was waited, or when no place is known). A failed listing is most likely
// when the store is slow for everyone (a loaded host: connections and
// logins outlast the call timeout), so every standby of the release may
// meet one; were they all to try at once, the order would be the race's.
// A stale place is most often too far back (standbys ahead have left
// since), which only holds back longer, never past (herdFront−1)·δ, so
// liveness is bounded as before; one too near the front (a better standby
// joined since) holds back less, at worst not at all, as every standby did
// before.
func (cd *candidacy) lastTurn(last bool) time.Duration {
	p := cd.pos.Load()
	if last || p <= 0 || p >= herdFront {
		return 0
	}
	return time.Duration(p) * cd.timing.Step
}

// leave stops the heartbeat and removes the registration, on a context of
// its own: a cancelled Acquire (a signal while waiting) must not leave a
// candidate behind. A connection is set up first, within leaveSetup: a
// standby that holds none between checks, on a loaded server, would
// otherwise spend the call timeout logging in and leave its registration to
// lapse (seen: PostgreSQL listed a standby 15 s after its clean exit).
func (cd *candidacy) leave(ctx context.Context) {
	close(cd.stop)
	cd.wg.Wait()
	ctx = context.WithoutCancel(ctx)
	cd.connect(ctx, leaveSetup)
	cctx, cancel := cd.callCtx(ctx)
	defer cancel()
	if err := cd.reg.Leave(cctx, cd.name, cd.c.ID); err != nil {
		cd.log.Debug("leaving the standbys failed; the registration lapses by itself", "lease", cd.name, "err", err)
	}
}

// ChangeWatcher is an optional capability of a Store that can tell a watcher
// soon after the holder or the standbys of a lease may have changed (file:
// inotify; Redis: its channels and the known expiry times). Stores without it
// are polled.
type ChangeWatcher interface {
	// WatchChanges starts watching the lease name. The caller reads the
	// state after WatchChanges returns, so no change after that read is
	// missed; it must Close the Changes.
	WatchChanges(ctx context.Context, name string) (Changes, error)
}

// Changes is one watch started by ChangeWatcher.WatchChanges.
type Changes interface {
	// Next blocks until something about the lease may have changed since
	// the caller read holder and cands (a hint: spurious returns are
	// allowed), and returns nil; or until ctx is done, and returns its
	// error. holder and cands let the store wake at the moment a
	// registration or a lease would lapse.
	Next(ctx context.Context, holder *Holder, cands []Candidate) error
	// Close ends the watch and waits for whatever it started.
	Close() error
}

// takeTurn waits, after a wake-up, until it is this candidate's turn to
// try: at once for the first in line, p·δ for position p at the front, and
// for a standby behind the front its spread, then a second look. It returns
// the holder when a listing found the lease held (the caller waits again
// without trying), nil when the caller should try now, and ctx's error
// when the wait ran out.
func (cd *candidacy) takeTurn(ctx context.Context, clock Clock) (*Holder, error) {
	last := false
	if cd.behind() {
		if err := clock.SleepUntil(ctx, clock.Now()+cd.spread()); err != nil {
			return nil, err
		}
		last = true
	}
	for {
		d, again, h := cd.turn(ctx, last)
		if h != nil {
			return h, nil
		}
		if d > 0 {
			if err := clock.SleepUntil(ctx, clock.Now()+d); err != nil {
				return nil, err
			}
		}
		if !again {
			return nil, nil
		}
		last = true
	}
}
