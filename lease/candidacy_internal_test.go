package lease

import (
	"context"
	"log/slog"
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
	cd := joinCandidates(context.Background(), r, "n", Candidate{ID: "me"}, time.Second, slog.New(slog.DiscardHandler))
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
