package lease

import (
	"context"
	"log/slog"
	"slices"
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
	cs := []Candidate{{ID: "fake", Remaining: 365 * 24 * time.Hour}, {ID: "real", Remaining: real}, {ID: "me", Remaining: 365 * 24 * time.Hour}, {ID: "unknown"}}
	got := timing.plausible(cs, "me")
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	if want := []string{"real", "me", "unknown"}; !slices.Equal(ids, want) {
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
