package leasetest

import (
	"context"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.CandidateRegistry = (*MemCandidates)(nil)

// MemCandidates is a MemStore that also keeps a candidate registry, with
// registrations expiring on the store's clock, for tests of Acquire's
// takeover order.
type MemCandidates struct {
	*MemStore
	// Timing is what CandidateTiming reports.
	Timing lease.CandidateTiming

	cmu   sync.Mutex
	cands map[string]map[string]memCand // lease name → candidate ID → registration
}

type memCand struct {
	c       lease.Candidate
	expires time.Duration
}

// Join registers or refreshes c until expiry from now on the store's clock.
func (s *MemCandidates) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.cands == nil {
		s.cands = map[string]map[string]memCand{}
	}
	if s.cands[name] == nil {
		s.cands[name] = map[string]memCand{}
	}
	s.cands[name][c.ID] = memCand{c: c, expires: s.clock().Now() + expiry}
	return len(s.live(name)), nil
}

// Leave removes a registration.
func (s *MemCandidates) Leave(ctx context.Context, name, id string) error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	delete(s.cands[name], id)
	return nil
}

// live returns the unexpired candidates of name in takeover order; s.cmu
// must be held.
func (s *MemCandidates) live(name string) []lease.Candidate {
	var cs []lease.Candidate
	now := s.clock().Now()
	for _, mc := range s.cands[name] {
		if mc.expires > now {
			c := mc.c
			c.Remaining = mc.expires - now
			cs = append(cs, c)
		}
	}
	lease.SortCandidates(cs)
	return cs
}

// Candidates returns the live candidates and the holder.
func (s *MemCandidates) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	h, err := s.Status(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.live(name), h, nil
}

// CandidateTiming returns Timing.
func (s *MemCandidates) CandidateTiming() lease.CandidateTiming { return s.Timing }
