// Package line keeps where a store's own standbys stand in their leases'
// lines, for the stores whose waiters cost the server something while they
// wait (pglease: a LISTEN connection; mysqllease: a read of the row every
// poll): only the first Front in takeover order pay that cost, and a
// standby further back sleeps.
//
// Behind the front, a standby sleeps until the lease's expiry as it last
// read it, or until a listing places it at the front (Behind's channel):
// lease's candidacy lists again while it is behind (CandidateTiming.Relist).
package line

import (
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Places is where a store's standbys stand, by lease name. A place is
// known from a listing (Listed), or, until the first one, from the count a
// join returns (Joined: a newcomer is at the back); a lease the store
// never joined the standbys of has no known place. The zero value is not
// usable: use New.
type Places struct {
	front int

	mu   sync.Mutex
	mine map[string]lease.Candidate // the store's registration
	pos  map[string]int             // the known place (0: first in line)
	// promote holds the channel closed when a standby behind the front is
	// placed at the front.
	promote map[string]chan struct{}
}

// New returns Places whose first front standbys are at the front.
func New(front int) *Places {
	return &Places{front: front, mine: map[string]lease.Candidate{}, pos: map[string]int{}, promote: map[string]chan struct{}{}}
}

// Behind returns nil when the store's standby for name is at the front of
// its line or its place is unknown; else the channel closed when it moves
// to the front.
func (p *Places) Behind(name string) (promote <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pos, known := p.pos[name]
	if !known || pos < p.front {
		return nil
	}
	ch := p.promote[name]
	if ch == nil {
		ch = make(chan struct{})
		p.promote[name] = ch
	}
	return ch
}

// AtFront reports whether the store's standby for name is known to be at
// the front of its line.
func (p *Places) AtFront(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pos, known := p.pos[name]
	return known && pos < p.front
}

// Joined records the store's registration c for name; until a listing
// says where it stands, it is at the back of the live ones. It reports
// whether the place is at the front.
func (p *Places) Joined(name string, c lease.Candidate, live int) (front bool) {
	p.mu.Lock()
	p.mine[name] = c
	pos, known := p.pos[name]
	p.mu.Unlock()
	if known {
		return pos < p.front
	}
	return p.Place(name, live-1)
}

// Left forgets the store's registration id for name.
func (p *Places) Left(name, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.mine[name]; ok && c.ID == id {
		delete(p.mine, name)
		delete(p.pos, name)
		if ch := p.promote[name]; ch != nil {
			close(ch)
			delete(p.promote, name)
		}
	}
}

// Listed records where the store's registration for name stands in cs (in
// takeover order, as listed with timing): its index among the
// registrations a live standby could have made (as lease orders them: one
// asking for a longer expiry than any heartbeat does is ignored), or, when
// it is not listed, the number that sort before it. It reports whether
// the store has a registration for name, and whether it is at the front.
func (p *Places) Listed(name string, cs []lease.Candidate, timing lease.CandidateTiming) (mine, front bool) {
	p.mu.Lock()
	c, ok := p.mine[name]
	p.mu.Unlock()
	if !ok {
		return false, false
	}
	bound := timing.MaxExpiry(2*len(cs)+2) + time.Second
	pos := 0
	for _, x := range cs {
		if x.ID == c.ID {
			break
		}
		if x.Remaining > bound {
			continue
		}
		if x.Priority > c.Priority || x.Priority == c.Priority && x.Since.Before(c.Since) || x.Priority == c.Priority && x.Since.Equal(c.Since) && x.ID < c.ID {
			pos++
		}
	}
	return true, p.Place(name, pos)
}

// Place records that the store's standby for name is at pos (0: first in
// line), waking its Wait when that is at the front; it reports whether it
// is.
func (p *Places) Place(name string, pos int) (front bool) {
	front = pos < p.front
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pos[name] = pos
	if ch := p.promote[name]; front && ch != nil {
		close(ch)
		delete(p.promote, name)
	}
	return front
}
