package objlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/background"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	"github.com/leaderrun/leaderrun/lease/internal/unchanged"
)

// MinTTL is the shortest lease: a renewal is one request to a store that
// may be far away.
const MinTTL = time.Second

// epsilon is the store's margin ε. Nothing is rounded (a waiter counts on
// its own clock from after it read the object), so it is headroom only.
const epsilon = 10 * time.Millisecond

// DefaultPoll is how often a waiter looks at a held lease: the store
// cannot wake it, and every look is a billed request.
const DefaultPoll = time.Second

// Config is what a Store is made of.
type Config struct {
	// Bucket is the transport.
	Bucket Bucket
	// Store names the store kind in messages ("S3").
	Store string
	// CallTimeout bounds each store call; it must be positive.
	CallTimeout time.Duration
	// Poll is how often a waiter looks at a held lease; zero means
	// DefaultPoll.
	Poll time.Duration
	// Log receives debug lines; nil discards them.
	Log *slog.Logger
	// Probed says the store's conditional writes passed Probe already;
	// when false, Connect probes (with ProbeCache) before the first
	// acquisition writes anything.
	Probed bool
	// ProbeCache is Probe's cache directory; empty: none.
	ProbeCache string
}

// Store is a lease.Store on a Bucket. It is safe for concurrent use; Close
// it when done. A store package embeds it in a Store of its own.
type Store struct {
	b      Bucket
	kind   string
	call   time.Duration
	poll   time.Duration
	log    *slog.Logger
	clock  lease.BootClock
	seen   unchanged.Since
	bg     background.Group
	closed atomic.Bool

	probeMu    sync.Mutex // one probe at a time
	probed     atomic.Bool
	probeCache string
}

var (
	_ lease.Store       = (*Store)(nil)
	_ lease.ClockTokens = (*Store)(nil)
	_ lease.SlotLister  = (*Store)(nil)
	_ lease.Connector   = (*Store)(nil)
)

// New returns a Store on c.Bucket. It writes nothing until Probe passed:
// c.Probed, or Connect.
func New(c Config) *Store {
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	st := &Store{b: c.Bucket, kind: c.Store, call: c.CallTimeout, poll: c.Poll, log: c.Log, probeCache: c.ProbeCache}
	st.probed.Store(c.Probed)
	return st
}

// TokensCountClock marks the tokens as store clock readings (see the
// package doc).
func (*Store) TokensCountClock() {}

var errClosed = errors.New("the store is closed")

func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.call)
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return lease.NewError(s.b.Where()+": "+errClosed.Error(), lease.ErrUnavailable)
	}
	return nil
}

// read gets name's lease object: nil when there is none. It records the
// version as seen.
func (s *Store) read(ctx context.Context, name string) (*record, string, error) {
	if err := s.checkOpen(); err != nil {
		return nil, "", err
	}
	o, err := s.b.Get(ctx, leaseKey(name))
	if errors.Is(err, ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	now := s.clock.Now()
	var r record
	if json.Unmarshal(o.Body, &r) != nil || r.Name != name {
		return nil, "", storeerr.Config("%s: the object %s is not leaderrun's record of lease %s: delete it, or choose another lease name", s.b.Where(), leaseKey(name), name)
	}
	s.seen.See(name, o.Version, now)
	return &r, o.Version, nil
}

// expiresAt is when, on the boot clock, this Store judges version v of
// name's record r expired if it does not change: its TTL (plus ε) after
// it first saw v.
func (s *Store) expiresAt(name, v string, r *record) time.Duration {
	ttl := r.TTL
	if ttl <= 0 {
		ttl = lease.MaxTTL
	}
	return s.seen.See(name, v, s.clock.Now()) + ttl + epsilon
}

// free reports whether record r (version v) binds nobody any more.
func (s *Store) free(name, v string, r *record) bool {
	if r.Holder == "" {
		return true
	}
	if !r.HeldUntil.IsZero() && !time.Now().Before(r.HeldUntil) {
		return true
	}
	return s.clock.Now() >= s.expiresAt(name, v, r)
}

// Connect runs Probe if the store's Open could not (the store did not
// answer in time): it is set-up, given the caller's wait (lease.Connector),
// so a store slow to answer is a wait, never a refusal. It returns at once
// once a probe passed.
func (s *Store) Connect(ctx context.Context) error {
	if s.probed.Load() {
		return nil
	}
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.probed.Load() {
		return nil
	}
	if err := Probe(ctx, s.b, s.probeCache); err != nil {
		return err
	}
	s.probed.Store(true)
	return nil
}

// TryAcquire makes one attempt: a read of the lease object; when it is
// absent, a create; when it is free (released, its hold over, or unchanged
// for its TTL as this Store saw it), a replace on the version read. A
// record that carries req.ID is our own earlier attempt whose answer was
// lost: it is renewed and taken.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := storeopt.CheckRequest(req.ID, req.TTL, s.kind, MinTTL); err != nil {
		return nil, err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := s.Connect(cctx); err != nil { // nothing is written before the probe passed
		return nil, err
	}
	cur, v, err := s.read(cctx, req.Name)
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.Holder == req.Label && cur.ID == req.ID && cur.HeldUntil.IsZero() {
		return s.adopt(ctx, cur, v)
	}
	if cur != nil && !s.free(req.Name, v, cur) {
		return nil, &lease.HeldError{By: cur.holder()}
	}
	now := time.Now()
	rec := record{Name: req.Name, Holder: req.Label, ID: req.ID, TTL: req.TTL, Since: now, Renewed: now}
	var nv string
	if cur == nil {
		nv, err = s.b.Create(cctx, leaseKey(req.Name), rec.encode())
	} else {
		nv, err = s.b.Replace(cctx, leaseKey(req.Name), rec.encode(), v)
	}
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		return nil, s.lostRace(cctx, req.Name)
	}
	if err != nil {
		return nil, err
	}
	l := &objLease{s: s, rec: rec, version: nv}
	if cur != nil {
		l.floor = cur.Token
	}
	if err := l.takeToken(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// adopt takes over our own earlier attempt, whose answer was lost: one
// renewal restarts its TTL (and a token is taken if it had none yet).
func (s *Store) adopt(ctx context.Context, cur *record, v string) (lease.Lease, error) {
	l := &objLease{s: s, rec: *cur, version: v}
	if cur.Token == 0 {
		if err := l.takeToken(ctx); err != nil {
			return nil, err
		}
		return l, nil
	}
	if err := l.Renew(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// takeToken mints the token of the acquisition l just made and writes it
// into the record, conditional on the version our acquiring write made:
// only a holder mints, so racers that lost do not contend for the counter.
// A record that changed in between (taken over already) fails the
// acquisition (*lease.HeldError), and its token is never used. So a
// token is used only if no acquisition came between the acquiring write and
// the token's write, and every later acquisition reads the counter after
// that (see the package doc).
func (l *objLease) takeToken(ctx context.Context) error {
	s := l.s
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	tok, at, err := s.mint(cctx, l.rec.Name, l.floor)
	if errors.Is(err, lease.ErrTokenAhead) {
		// Nothing was granted: free the record now rather than leave the
		// lease blocked for its TTL by an acquisition that ran nothing.
		_ = l.Release(context.WithoutCancel(ctx))
	}
	if err != nil {
		return err
	}
	next := l.rec
	next.Token = tok
	nv, err := s.b.Replace(cctx, leaseKey(next.Name), next.encode(), l.version)
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		return s.lostRace(cctx, next.Name)
	}
	if err != nil {
		return err
	}
	l.rec, l.version, l.granted = next, nv, at.UTC()
	return nil
}

// lostRace is the error of an acquiring write that another's write beat:
// a *lease.HeldError naming it when it can be read.
func (s *Store) lostRace(ctx context.Context, name string) error {
	he := &lease.HeldError{By: lease.Holder{Name: name}}
	if cur, _, err := s.read(ctx, name); err == nil && cur != nil && cur.Holder != "" {
		he.By = cur.holder()
	}
	return he
}

// Status returns the holder the record names (ID left out), or nil when
// the object is absent, released, its hold is over, or its last write plus
// its TTL has passed by this host's wall clock. That is a reading for
// people, never a decision: only a waiter's own count lets anyone take the
// lease over.
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	cur, _, err := s.read(cctx, name)
	if err != nil || cur == nil {
		return nil, err
	}
	return wallView(cur, time.Now()), nil
}

// wallView is the holder of r by the wall clock now, or nil.
func wallView(r *record, now time.Time) *lease.Holder {
	if r.Holder == "" || (!r.HeldUntil.IsZero() && !now.Before(r.HeldUntil)) {
		return nil
	}
	h := r.holder()
	if !r.HeldUntil.IsZero() {
		h.Remaining = r.HeldUntil.Sub(now)
	} else if !r.Renewed.IsZero() && r.TTL > 0 {
		if h.Remaining = r.Renewed.Add(r.TTL).Sub(now); h.Remaining <= 0 {
			return nil
		}
	}
	return &h
}

// Limits: leases expire (as waiters judge them), in milliseconds from
// MinTTL.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{Expires: true, Epsilon: epsilon, MinTTL: MinTTL, TTLUnit: time.Millisecond}
}

// Close finishes the standby removals in flight (each bounded by the call
// timeout); calls made afterwards fail. Close is idempotent.
func (s *Store) Close() error {
	s.bg.Close()
	s.closed.Store(true)
	return nil
}

// objLease is one acquisition: its record and the version our last write
// made (or found still ours).
type objLease struct {
	s *Store

	mu      sync.Mutex
	rec     record
	version string
	// granted is the store's clock the token counted (Holder.Granted);
	// zero for an acquisition adopted with its token already taken.
	granted time.Time
	// floor is the token the lease object held before this acquisition
	// wrote it: the new token goes above it (mint).
	floor uint64
}

// Info returns the acquisition.
func (l *objLease) Info() lease.Holder {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.rec.holder()
	h.ID = l.rec.ID
	h.HeldUntil = time.Time{}
	h.Granted = l.granted
	return h
}

// Renew writes the record again, conditional on the version of our last
// write, which gives the object a new version and restarts every waiter's
// count. It wraps lease.ErrLost when the object is gone or another's.
func (l *objLease) Renew(ctx context.Context) error {
	return l.write(ctx, "renew", lease.ErrLost, func(r *record) {})
}

// Release marks the record released (no holder), conditional on it still
// being ours; the object and its token stay. It wraps lease.ErrNotHeld
// when the record is gone or another's.
func (l *objLease) Release(ctx context.Context) error {
	return l.write(ctx, "release", lease.ErrNotHeld, func(r *record) {
		r.Holder, r.ID, r.HeldUntil = "", "", time.Time{}
	})
}

var _ lease.Holding = (*objLease)(nil)

// ReleaseHeld gives the lease up with a hold: the record keeps our holder
// and token and gains the hold's end (wall clock, for every reader) and a
// TTL of the hold, so a waiter judges it free when the wall clock passes
// the end or the record stays unchanged for the hold on its own clock,
// whichever comes first.
func (l *objLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	return storeopt.ReleaseHeld(ctx, hold, l.Release, func(ctx context.Context, hold time.Duration) error {
		until := time.Now().Add(hold)
		return l.write(ctx, "release", lease.ErrNotHeld, func(r *record) {
			r.HeldUntil, r.TTL = until, hold
		})
	})
}

// write applies change to our record with a replace conditional on its
// version. A failed condition is read: a record that still carries our
// acquisition (an answer of ours was lost) is written again on its
// version; anything else is gone, the kind of "not ours any more".
func (l *objLease) write(ctx context.Context, op string, gone error, change func(*record)) error {
	s := l.s
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	name := l.rec.Name
	info := l.rec.holder()
	info.ID = l.rec.ID
	for range 3 {
		if err := s.checkOpen(); err != nil {
			return err
		}
		next := l.rec
		next.Renewed = time.Now()
		change(&next)
		v, err := s.b.Replace(cctx, leaseKey(name), next.encode(), l.version)
		if err == nil {
			l.rec, l.version = next, v
			return nil
		}
		if errors.Is(err, ErrNotFound) {
			// S3 answers a conditional write to a missing object 404: one
			// round trip tells, which matters when renewals time out.
			return lease.NewError(fmt.Sprintf("%s no longer has the object of lease %s (it was deleted)", s.b.Where(), name), gone)
		}
		if !errors.Is(err, ErrConflict) {
			return err
		}
		cur, cv, err := s.read(cctx, name)
		if err != nil {
			return err
		}
		if cur == nil {
			return lease.NewError(fmt.Sprintf("%s no longer has the object of lease %s (it was deleted)", s.b.Where(), name), gone)
		}
		if !cur.ours(info) {
			return lease.NewError(fmt.Sprintf("%s: lease %s no longer names us (released, taken over by %q, or edited)", s.b.Where(), name, cur.Holder), gone)
		}
		l.rec, l.version = *cur, cv // still ours: write again on this version
	}
	return lease.NewError(fmt.Sprintf("%s: %s %s: the lease object kept changing under us", s.b.Where(), op, name), lease.ErrUnavailable)
}
