package objlease

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Standbys. Each registered standby of lease NAME is an object of its own,
// standby/NAME@ID (ID: the first 16 hex digits of its candidacy ID), with
// its label, priority, wait start and the wall-clock end of its
// registration. The store expires nothing, so liveness is judged by the
// wall clock, which is good enough for a registry that is never needed for
// safety (see lease.CandidateRegistry); a registration lapsed for a minute
// is deleted by whoever lists it. Standbys are objects of their own, apart
// from the lease's, because every write to the lease's object restarts
// the waiters' counts.

// heartbeatsPerSecond bounds the refreshes of one lease's standbys
// together, and heartbeatEvery is the shortest interval of one: each
// refresh is a write and a listing, and object stores bill every request
// (docs/stores.md says what a standby costs).
const (
	heartbeatsPerSecond = 0.5
	heartbeatEvery      = 10 * time.Second
)

// lapsedFor is how long after its end a standby object is deleted.
const lapsedFor = time.Minute

// standby is a standby object's content.
type standby struct {
	ID       string    `json:"id"`
	Label    string    `json:"holder"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
}

var _ lease.CandidateRegistry = (*Store)(nil)

func standbyKey(name, id string) string {
	if len(id) > 16 {
		id = id[:16]
	}
	return standbyPrefix(name) + id
}

// Join registers c, or refreshes its registration, for expiry: a write of
// its object, then a listing of the standbys' objects, whose number it
// returns (registrations lapsed for less than lapsedFor included: the
// number only paces heartbeats, and reading each would cost a request).
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	body, _ := json.Marshal(standby{ID: c.ID, Label: c.Label, Priority: c.Priority, Since: c.Since, Until: time.Now().Add(expiry)})
	if err := s.b.Put(cctx, standbyKey(name, c.ID), body); err != nil {
		return 0, err
	}
	keys, err := s.b.List(cctx, standbyPrefix(name))
	if err != nil {
		return 0, err
	}
	return max(len(keys), 1), nil
}

// Leave deletes the standby's object after Leave returns (on the store's
// background group, which Close waits for); a failure leaves it to lapse.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	key := standbyKey(name, id)
	s.bg.Go(func() {
		cctx, cancel := s.callCtx(context.WithoutCancel(ctx))
		defer cancel()
		if err := s.b.Delete(cctx, key); err != nil {
			s.log.Debug("leaving the standbys failed; the registration lapses by itself", "name", name, "err", err)
		}
	})
	return nil
}

// Candidates lists the live standbys (the holder's own registration left
// out) in takeover order, and the holder (nil when the lease looks free by
// this Store's count or by the wall clock), with the time left before
// either would judge the holder gone.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	cur, v, err := s.read(cctx, name)
	if err != nil {
		return nil, nil, err
	}
	var h *lease.Holder
	skip := ""
	if cur != nil {
		if wh := wallView(cur, time.Now()); wh != nil && !s.free(name, v, cur) {
			left := max(s.expiresAt(name, v, cur)-s.clock.Now(), 0)
			if wh.Remaining > 0 {
				left = min(left, wh.Remaining)
			}
			wh.Remaining = left
			h, skip = wh, cur.ID
		}
	}
	cs, err := s.standbys(cctx, name, skip)
	if err != nil {
		return nil, nil, err
	}
	return cs, h, nil
}

// standbys reads the live registrations of name but skip's, sorted, and
// deletes (in the background) those lapsed for lapsedFor.
func (s *Store) standbys(ctx context.Context, name, skip string) ([]lease.Candidate, error) {
	keys, err := s.b.List(ctx, standbyPrefix(name))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var cs []lease.Candidate
	for _, k := range keys {
		o, err := s.b.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue // left meanwhile
		}
		if err != nil {
			return nil, err
		}
		var sb standby
		switch {
		case json.Unmarshal(o.Body, &sb) != nil || sb.ID == "" || standbyKey(name, sb.ID) != k || sb.ID == skip:
		case now.Before(sb.Until):
			cs = append(cs, lease.Candidate{ID: sb.ID, Label: sb.Label, Priority: sb.Priority, Since: sb.Since, Remaining: sb.Until.Sub(now)})
		case now.After(sb.Until.Add(lapsedFor)):
			s.dropLapsed(k)
		}
	}
	lease.SortCandidates(cs)
	return cs, nil
}

// dropLapsed deletes a lapsed standby object.
func (s *Store) dropLapsed(key string) {
	s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.call)
		defer cancel()
		_ = s.b.Delete(ctx, key)
	})
}

// CandidateTiming: refreshes are a write and a listing, every 10s at the
// most; δ twice Kubernetes', for a store that may be far away.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	return lease.CandidateTiming{Heartbeat: true, PerSecond: heartbeatsPerSecond, MinInterval: heartbeatEvery, Step: 400 * time.Millisecond}
}
