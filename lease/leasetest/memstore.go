package leasetest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Store = (*MemStore)(nil)

// MemStore is an in-memory lease.Store whose expiry runs on a lease.Clock,
// for deterministic timing tests of the keeper. It passes the conformance
// suite (see memstore_test.go), so what the keeper tests prove against it
// holds for a store that behaves like the real ones. Every Open of a suite
// harness may return the same MemStore: Close does nothing. Its standbys
// are registered until they leave, as the file store's (MemCandidates
// keeps them with heartbeats), and its run history is kept in memory.
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
	// OnRuns, when set, is called at the start of every Runs; a non-nil
	// error is returned instead of the history (a slow store: block until
	// ctx is done and return its error).
	OnRuns func(ctx context.Context) error

	mu       sync.Mutex
	leases   map[string]*memEntry
	tokens   map[string]uint64
	changed  chan struct{}                         // closed and replaced when any lease is released or taken
	standbys map[string]map[string]lease.Candidate // lease name → candidate ID → registration
	runs     map[string][]lease.Run                // lease name → its history
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

// ReleaseHeld keeps the lease taken for hold from now on the store's
// clock, renewed by nobody, then free; a hold that is not positive
// releases at once.
func (l *memLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	if hold <= 0 {
		return l.Release(ctx)
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	e := l.s.current(l.rec.Name)
	if e == nil || e.rec.ID != l.rec.ID {
		return lease.NewError("lease "+l.rec.Name+" is not held by this holder", lease.ErrNotHeld)
	}
	e.rec.ID = "" // nobody renews it, or releases it again
	e.rec.HeldUntil = time.Now().Add(hold)
	e.expires = l.s.clock().Now() + hold
	l.s.notify()
	return nil
}

// Join registers c until it leaves (expiry is ignored: no heartbeats) and
// returns the number of registered candidates of name.
func (s *MemStore) Join(ctx context.Context, name string, c lease.Candidate, _ time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.standbys == nil {
		s.standbys = map[string]map[string]lease.Candidate{}
	}
	if s.standbys[name] == nil {
		s.standbys[name] = map[string]lease.Candidate{}
	}
	s.standbys[name][c.ID] = c
	return len(s.standbys[name]), nil
}

// Leave removes a registration.
func (s *MemStore) Leave(ctx context.Context, name, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.standbys[name], id)
	return nil
}

// Candidates returns the registered candidates in takeover order and the
// holder.
func (s *MemStore) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	h, err := s.Status(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []lease.Candidate
	for _, c := range s.standbys[name] {
		cs = append(cs, c)
	}
	lease.SortCandidates(cs)
	return cs, h, nil
}

// CandidateTiming: no heartbeats (a registration lasts until Leave) and no
// δ.
func (s *MemStore) CandidateTiming() lease.CandidateTiming { return lease.CandidateTiming{} }

// RecordRun replaces the record of r's token and keeps the newest keep
// valid runs (lease.NewestRuns).
func (s *MemStore) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string][]lease.Run{}
	}
	runs := slices.DeleteFunc(s.runs[r.Name], func(o lease.Run) bool { return o.Token == r.Token })
	s.runs[r.Name] = lease.NewestRuns(append(runs, r), lease.RunBounds{Name: r.Name, Now: time.Now()}, lease.HistoryKeep(keep))
	return nil
}

// Runs returns up to limit valid runs of name, newest first.
func (s *MemStore) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.OnRuns != nil {
		if err := s.OnRuns(ctx); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return lease.NewestRuns(slices.Clone(s.runs[name]), lease.RunBounds{Name: name, Now: time.Now()}, limit), nil
}
