package leasetest

import (
	"context"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Store = (*MemStore)(nil)

// MemStore is an in-memory lease.Store whose expiry runs on a lease.Clock,
// for deterministic timing tests of the keeper. It passes the conformance
// suite (see memstore_test.go), so what the keeper tests prove against it
// holds for a store that behaves like the real ones. Every Open of a suite
// harness may return the same MemStore: Close does nothing.
type MemStore struct {
	// Clock measures expiry; nil means lease.BootClock.
	Clock lease.Clock
	// Epsilon is reported in Limits.
	Epsilon time.Duration
	// OnRenew, when set, is called at the start of every Renew with the
	// renewing lease's ID; a non-nil error is returned instead of renewing.
	// Tests script faults with it: block until ctx is done (a hung call),
	// return an error (transient), or return lease.ErrLost.
	OnRenew func(ctx context.Context, id string) error

	mu      sync.Mutex
	leases  map[string]*memEntry
	tokens  map[string]uint64
	changed chan struct{} // closed and replaced when any lease is released or taken
}

type memEntry struct {
	rec     lease.Holder
	expires time.Duration
}

func (s *MemStore) clock() lease.Clock {
	if s.Clock == nil {
		return lease.BootClock{}
	}
	return s.Clock
}

// Limits reports an expiring store with the configured Epsilon.
func (s *MemStore) Limits() lease.Limits { return lease.Limits{Expires: true, Epsilon: s.Epsilon} }

// Close does nothing.
func (s *MemStore) Close() error { return nil }

// current returns the live entry for name; s.mu must be held.
func (s *MemStore) current(name string) *memEntry {
	e := s.leases[name]
	if e == nil || s.clock().Now() >= e.expires {
		return nil
	}
	return e
}

func (s *MemStore) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// TryAcquire grants the lease if it is free or expired, or if it is held under
// req.ID already (a retried attempt).
func (s *MemStore) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases == nil {
		s.leases, s.tokens = map[string]*memEntry{}, map[string]uint64{}
	}
	now := s.clock().Now()
	if e := s.current(req.Name); e != nil {
		if e.rec.ID != req.ID {
			by := e.rec
			by.ID = ""
			return nil, &lease.HeldError{By: by}
		}
		e.expires = now + req.TTL
		return &memLease{s: s, rec: e.rec}, nil
	}
	base, _, _ := lease.ParseSlotName(req.Name) // the slots of a lease share its counter
	s.tokens[base]++
	rec := lease.Holder{Name: req.Name, Label: req.Label, ID: req.ID, Token: s.tokens[base], Since: time.Now(), TTL: req.TTL}
	s.leases[req.Name] = &memEntry{rec: rec, expires: now + req.TTL}
	s.notify()
	return &memLease{s: s, rec: rec}, nil
}

// Wait returns when any lease changes hands, when the current holder's TTL
// runs out, or when ctx ends.
func (s *MemStore) Wait(ctx context.Context, name string, _ *lease.HeldError) error {
	s.mu.Lock()
	e := s.current(name)
	if e == nil {
		s.mu.Unlock()
		return nil
	}
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	ch, expires := s.changed, e.expires
	s.mu.Unlock()
	sleepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.clock().SleepUntil(sleepCtx, expires) }()
	select {
	case <-ch:
		cancel()
		<-done
	case err := <-done:
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Status returns the live holder of name, or nil.
func (s *MemStore) Status(ctx context.Context, name string) (*lease.Holder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.current(name)
	if e == nil {
		return nil, nil
	}
	h := e.rec
	h.ID = ""
	h.Remaining = e.expires - s.clock().Now()
	return &h, nil
}

// Break drops the holder of name, as an operator deleting the key would.
func (s *MemStore) Break(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, name)
	s.notify()
}

type memLease struct {
	s   *MemStore
	rec lease.Holder
}

func (l *memLease) Info() lease.Holder { return l.rec }

func (l *memLease) Renew(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if hook := l.s.OnRenew; hook != nil {
		if err := hook(ctx, l.rec.ID); err != nil {
			return err
		}
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	e := l.s.current(l.rec.Name)
	if e == nil || e.rec.ID != l.rec.ID {
		return lease.NewError("lease "+l.rec.Name+" is gone or held by another", lease.ErrLost)
	}
	e.expires = l.s.clock().Now() + l.rec.TTL
	return nil
}

func (l *memLease) Release(ctx context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	e := l.s.current(l.rec.Name)
	if e == nil || e.rec.ID != l.rec.ID {
		return lease.NewError("lease "+l.rec.Name+" is not held by this holder", lease.ErrNotHeld)
	}
	delete(l.s.leases, l.rec.Name)
	l.s.notify()
	return nil
}
