package kubelease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/background"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	"github.com/leaderrun/leaderrun/lease/internal/unchanged"
	authzv1 "k8s.io/api/authorization/v1"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultCallTimeout bounds one store call when Options.CallTimeout is zero.
const DefaultCallTimeout = 2 * time.Second

// MinTTL is the shortest lease: leaseDurationSeconds is whole seconds.
const MinTTL = time.Second

// epsilon is the store's margin ε. Nothing is rounded (TTLs are whole
// seconds, and a waiter counts on its own clock from after it read the
// record), so it is headroom only.
const epsilon = 10 * time.Millisecond

// Options tunes a Store; the zero value is usable. CallTimeout bounds every
// call to the API server. Getenv reads KUBECONFIG, HOME and the in-cluster
// variables (KUBERNETES_SERVICE_HOST and _PORT). Log receives debug lines,
// never credentials.
type Options = lease.OpenOptions

// Store is a lease.Store on Kubernetes Lease objects of one namespace. It
// is safe for concurrent use; Close it when done.
type Store struct {
	cfg         *config
	callTimeout time.Duration
	log         *slog.Logger
	leases      leaseAPI
	reviews     rulesReviewer
	clock       lease.BootClock
	seen        unchanged.Since
	regs        registrations
	bg          background.Group
	closed      atomic.Bool

	// answered is when Connect last had an answer (UnixNano); 0 after a
	// call found the API server unavailable.
	answered atomic.Int64

	getenv func(string) string // Options.Getenv: the pod's name (pods.go)
}

var (
	_ lease.Store     = (*Store)(nil)
	_ lease.Connector = (*Store)(nil)
	_ lease.Connector = (*kubeLease)(nil)
)

// warmFor is how long after an answer the connection (HTTP/2, with its
// own health pings) is taken to be still up: Connect then sends nothing.
const warmFor = 30 * time.Second

// Connect sets up the connection to the API server (TCP, TLS, the HTTP/2
// preface, a token from a credential plugin) when none answered within
// warmFor (lease.Connector): a GET of /version, bounded by ctx alone, not
// the call timeout. Any answer but a refusal of the credentials means the
// connection is up; the next call uses it.
func (s *Store) Connect(ctx context.Context) error {
	if time.Since(time.Unix(0, s.answered.Load())) < warmFor {
		return nil
	}
	err := s.leases.rc.Get().AbsPath("/version").Do(ctx).Error()
	var se apierrors.APIStatus
	if err == nil || errors.As(err, &se) && !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
		s.answered.Store(time.Now().UnixNano())
		return nil
	}
	return s.classify("get", "connect", err)
}

// Open returns a store for the namespace named by raw (see the package
// doc and docs/stores.md for the URL form and where credentials come
// from). It asks the API server once what this user may do with Leases
// there, and refuses (lease.ErrConfig, one line naming the missing RBAC
// verbs) when a verb leaderrun needs is missing; an API server that cannot
// be reached yet is not an error: its calls report lease.ErrUnavailable
// until it answers.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	o.CallTimeout, o.Getenv, o.Log = storeopt.Defaults(o.CallTimeout, DefaultCallTimeout, o.Getenv, o.Log)
	routeLibraryLog(o.Log)
	c, err := parseURL(raw, o.Getenv)
	if err != nil {
		return nil, err
	}
	c.rest.WarningHandler = warnings{o.Log}
	lc, err := restClient(c.rest, coordv1.SchemeGroupVersion)
	if err != nil {
		return nil, storeerr.Config("%s: %s", c.where, storeerr.Quote(storeerr.FirstLine(err.Error()), c.secrets, 8))
	}
	ac, err := restClient(c.rest, authzv1.SchemeGroupVersion)
	if err != nil {
		return nil, storeerr.Config("%s: %s", c.where, storeerr.Quote(storeerr.FirstLine(err.Error()), c.secrets, 8))
	}
	s := &Store{cfg: c, callTimeout: o.CallTimeout, log: o.Log.With("store", c.where, "namespace", c.namespace),
		leases: leaseAPI{rc: lc, ns: c.namespace}, reviews: rulesReviewer{rc: ac}, getenv: o.Getenv}
	if err := s.checkAccess(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// verbs are the RBAC verbs on leases that the store uses.
var verbs = []string{"get", "list", "watch", "create", "update", "delete"}

// checkAccess asks the API server (a SelfSubjectRulesReview, which every
// authenticated user may make) whether this user may use every verb on
// Leases in the namespace. An answer the server marks incomplete (an
// authorizer that cannot list rules) is not held against the user.
func (s *Store) checkAccess(ctx context.Context) error {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	rev, err := s.reviews.Create(cctx, rulesReview(s.cfg.namespace))
	if err != nil {
		e := s.classify("create selfsubjectrulesreviews", "check permissions", err)
		if isUnavailable(e) && ctx.Err() == nil {
			s.log.Debug("API server not reachable yet", "err", e)
			return nil
		}
		return e
	}
	if rev.Status.Incomplete {
		return nil
	}
	if missing := missingVerbs(rev.Status.ResourceRules); len(missing) > 0 {
		return storeerr.Config("%s does not let this user %s leases in namespace %s (RBAC): grant the verbs get, list, watch, create, update and delete on leases.coordination.k8s.io in a Role (see docs/stores.md, section Kubernetes)", s.cfg.where, joinVerbs(missing), s.cfg.namespace)
	}
	return nil
}

func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.callTimeout)
}

// String returns the store URL.
func (s *Store) String() string { return s.cfg.display }

// read lists the Lease object of name (nil when there is none) and the
// list's resourceVersion: the cluster's revision at the read. It records
// the object's version as seen.
func (s *Store) read(ctx context.Context, op, name string) (*coordv1.Lease, uint64, error) {
	if s.closed.Load() {
		return nil, 0, s.classify("list", op, errClosed)
	}
	obj := objName(name)
	ll, err := s.leases.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + obj})
	if err != nil {
		return nil, 0, s.classify("list", op, err)
	}
	now := s.clock.Now()
	rev, ok := rv(ll.ResourceVersion)
	if !ok {
		return nil, 0, s.errRV(ll.ResourceVersion)
	}
	if len(ll.Items) == 0 {
		return nil, rev, nil
	}
	l := &ll.Items[0]
	if l.Labels[labelRole] != "" || (l.Annotations[annName] != "" && l.Annotations[annName] != name) {
		return nil, 0, storeerr.Config("%s: the Lease %s/%s is not the lease %s (it is another lease's or leaderrun's %s record): choose another lease name", s.cfg.where, s.cfg.namespace, obj, name, l.Labels[labelRole])
	}
	s.seen.See(name, l.ResourceVersion, now)
	return l, rev, nil
}

func (s *Store) errRV(v string) error {
	return storeerr.Config("%s answered resourceVersion %q, not a revision number: its storage is not etcd, and leaderrun cannot mint fencing tokens on it", s.cfg.where, v)
}

// free reports whether the record l (of name) no longer binds anyone: it
// names no holder, its hold ended by the wall clock, or this Store has seen
// it unchanged for its whole lease duration (plus ε) on the boot clock.
func (s *Store) free(name string, l *coordv1.Lease, r record) bool {
	if r.holder == "" {
		return true
	}
	if !r.heldUntil.IsZero() && !time.Now().Before(r.heldUntil) {
		return true
	}
	return s.clock.Now() >= s.expiresAt(name, l, r)
}

// expiresAt is when, on the boot clock, this Store will judge the record l
// expired if it does not change: a full lease duration (plus ε) after it
// first saw this version. A record without a duration never expires on
// its own.
func (s *Store) expiresAt(name string, l *coordv1.Lease, r record) time.Duration {
	ttl := r.ttl
	if ttl <= 0 {
		ttl = lease.MaxTTL
	}
	return s.seen.See(name, l.ResourceVersion, s.clock.Now()) + ttl + epsilon
}

// checkTTL refuses what leaseDurationSeconds cannot say exactly.
func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl%time.Second != 0 || ttl > lease.MaxTTL {
		return storeerr.Config("the Kubernetes lease TTL %v must be whole seconds from %v to %v (leaseDurationSeconds is whole seconds)", ttl, MinTTL, lease.MaxTTL)
	}
	return nil
}

// TryAcquire makes one attempt: a read of the Lease object, then, when it
// is absent, a create, and when it is free (released, its hold over, or
// unchanged for its whole duration as this Store saw it), an update
// conditional on the resourceVersion read. A record that carries req.ID is
// our own earlier attempt whose answer was lost: it is renewed and taken.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := storeopt.CheckRequest(req.ID, req.TTL, "Kubernetes", MinTTL); err != nil {
		return nil, err
	}
	if err := checkTTL(req.TTL); err != nil {
		return nil, err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	cur, rev, err := s.read(cctx, "acquire "+req.Name, req.Name)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		// The token exceeds every revision so far, so every token this name
		// had before the object was deleted (see the package doc).
		tok, err := s.slotToken(cctx, req, rev+1)
		if err != nil {
			return nil, err
		}
		return s.create(cctx, req, tok)
	}
	r := readRecord(cur)
	if r.holder == req.Label && r.id == req.ID && r.heldUntil.IsZero() {
		return s.adopt(cctx, req, cur, r)
	}
	if !s.free(req.Name, cur, r) {
		return nil, &lease.HeldError{By: holderOf(req.Name, r)}
	}
	// One more than the cluster's revision at the read, as for a create: above
	// every earlier token of the name, also those of its other slots, whose
	// objects may have been written after this one (see the package doc).
	tok, err := s.slotToken(cctx, req, rev+1)
	if err != nil {
		return nil, err
	}
	next := cur.DeepCopy()
	since := time.Now()
	next.Spec.LeaseTransitions = ptr(ptrVal(next.Spec.LeaseTransitions) + 1)
	setHolder(next, req.Label, req.ID, tok, req.TTL, since)
	next.Annotations[annName] = req.Name
	got, err := s.leases.Update(cctx, next, metav1.UpdateOptions{})
	if err != nil {
		return nil, s.lostRace(cctx, req.Name, "update", err)
	}
	return s.newLease(req, got, tok, since), nil
}

// slotToken is the token of an acquisition whose own object gives it
// token: the same for a lease, the counter's for a slot (see sharedToken).
func (s *Store) slotToken(ctx context.Context, req lease.Request, token uint64) (uint64, error) {
	if req.Slots <= 1 {
		return token, nil
	}
	return s.sharedToken(ctx, req.Name)
}

// create makes the Lease object of a first acquisition (or the first after
// the object was deleted).
func (s *Store) create(ctx context.Context, req lease.Request, token uint64) (lease.Lease, error) {
	since := time.Now()
	l := newObject(objName(req.Name), req.Name, req, token, since)
	l.Spec.LeaseTransitions = ptr(int32(0))
	got, err := s.leases.Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		return nil, s.lostRace(ctx, req.Name, "create", err)
	}
	return s.newLease(req, got, token, since), nil
}

// lostRace reads a failed acquiring write: another took the lease first (a
// conflict: *lease.HeldError naming it), or any other error.
func (s *Store) lostRace(ctx context.Context, name, verb string, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !(verb == "update" && apierrors.IsNotFound(err)) {
		return s.classify(verb, "acquire "+name, err)
	}
	he := &lease.HeldError{By: lease.Holder{Name: name}}
	if cur, _, rerr := s.read(ctx, "acquire "+name, name); rerr == nil && cur != nil {
		he.By = holderOf(name, readRecord(cur))
	}
	return he
}

// adopt takes over our own earlier attempt, whose answer was lost: one
// renewal (conditional on the version read) restarts its TTL.
func (s *Store) adopt(ctx context.Context, req lease.Request, cur *coordv1.Lease, r record) (lease.Lease, error) {
	next := cur.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	next.Spec.RenewTime = &now
	next.Spec.LeaseDurationSeconds = ptr(int32(req.TTL / time.Second))
	got, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return nil, s.lostRace(ctx, req.Name, "update", err)
	}
	info := lease.Holder{Name: req.Name, Label: req.Label, ID: req.ID, Token: r.token, Since: r.since, TTL: req.TTL}
	return &kubeLease{s: s, info: info, last: got}, nil
}

func (s *Store) newLease(req lease.Request, got *coordv1.Lease, token uint64, since time.Time) *kubeLease {
	info := lease.Holder{Name: req.Name, Label: req.Label, ID: req.ID, Token: token, Since: since, TTL: req.TTL}
	return &kubeLease{s: s, info: info, last: got}
}

// Status returns the holder the record names (ID left out), or nil when
// the Lease object is absent, released, its hold is over, or its renewTime
// plus leaseDurationSeconds has passed by this host's wall clock. That is
// a reading for people and probes, never a decision: the API server
// expires nothing, and only a waiter's own count (see the package doc)
// lets anyone take the lease over. Holder.Remaining is what is left by the
// same wall-clock reading.
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	cur, _, err := s.read(cctx, "status "+name, name)
	if err != nil || cur == nil {
		return nil, err
	}
	h, _ := wallView(name, cur, readRecord(cur), time.Now())
	return h, nil
}

// wallView is the holder of record r of object cur by the wall clock now,
// or nil (see Status); the time left by that reading, 0 when unknown.
func wallView(name string, cur *coordv1.Lease, r record, now time.Time) (*lease.Holder, time.Duration) {
	if r.holder == "" || (!r.heldUntil.IsZero() && !now.Before(r.heldUntil)) {
		return nil, 0
	}
	h := holderOf(name, r)
	if !r.heldUntil.IsZero() {
		h.Remaining = r.heldUntil.Sub(now)
	} else if cur.Spec.RenewTime != nil && r.ttl > 0 {
		if h.Remaining = cur.Spec.RenewTime.Add(r.ttl).Sub(now); h.Remaining <= 0 {
			return nil, 0
		}
	}
	return &h, h.Remaining
}

// Limits: leases expire (as waiters judge them); whole seconds from MinTTL.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{Expires: true, Epsilon: epsilon, MinTTL: MinTTL, TTLUnit: time.Second}
}

// Close finishes the standby removals in flight (each bounded by the call
// timeout); calls made afterwards fail. Close is idempotent.
func (s *Store) Close() error {
	s.bg.Close()
	s.closed.Store(true)
	return nil
}

// kubeLease is one acquisition and the last version of its object that
// one of our writes made (or found still ours).
type kubeLease struct {
	s    *Store
	info lease.Holder

	mu   sync.Mutex
	last *coordv1.Lease
}

// Connect is the store's Connect: a renewal after the connection went
// sets one up within the keeper's bound, not the call timeout.
func (l *kubeLease) Connect(ctx context.Context) error { return l.s.Connect(ctx) }

// Info returns the acquisition.
func (l *kubeLease) Info() lease.Holder { return l.info }

// Renew writes a new renewTime, conditional on the version of our last
// write. A conflict is read: if the record still carries our acquisition
// (an answer of ours was lost, or someone edited other fields), the write is
// made again on that version; else the lease is lost. It wraps
// lease.ErrLost when the object is gone or another's.
func (l *kubeLease) Renew(ctx context.Context) error {
	return l.write(ctx, "renew", lease.ErrLost, func(o *coordv1.Lease) {
		now := metav1.NewMicroTime(time.Now())
		o.Spec.RenewTime = &now
		o.Spec.LeaseDurationSeconds = ptr(int32(l.info.TTL / time.Second))
	})
}

// Release clears the holder as client-go's LeaseLock does (holderIdentity
// empty, leaseDurationSeconds 1), conditional on the record still being
// ours; the object and its token annotation stay. It wraps
// lease.ErrNotHeld when the record is gone or another's.
func (l *kubeLease) Release(ctx context.Context) error {
	return l.write(ctx, "release", lease.ErrNotHeld, func(o *coordv1.Lease) {
		now := metav1.NewMicroTime(time.Now())
		o.Spec.HolderIdentity = ptr("")
		o.Spec.LeaseDurationSeconds = ptr(int32(1))
		o.Spec.RenewTime = &now
		delete(o.Annotations, annID)
		delete(o.Annotations, annHeldUntil)
	})
}

var _ lease.Holding = (*kubeLease)(nil)

// ReleaseHeld gives the lease up with a hold (--hold-at-least): the record
// keeps our holder and token, gains the hold's end (wall clock, for every
// reader) and a leaseDurationSeconds of the hold, so that a waiter judges
// it free when the wall clock passes the end or the record stays unchanged
// for the hold on its own clock, whichever comes first. A hold is not a
// safety property (see lease.Holding). It wraps lease.ErrNotHeld when the
// record is gone or another's.
func (l *kubeLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	if hold <= 0 {
		return l.Release(ctx)
	}
	until := time.Now().Add(hold)
	secs := min((hold+time.Second-1)/time.Second, math.MaxInt32)
	return l.write(ctx, "release", lease.ErrNotHeld, func(o *coordv1.Lease) {
		now := metav1.NewMicroTime(time.Now())
		o.Spec.RenewTime = &now
		o.Spec.LeaseDurationSeconds = ptr(int32(secs))
		o.Annotations[annHeldUntil] = until.UTC().Format(time.RFC3339Nano)
	})
}

// write applies change to our record with an update conditional on its
// version, as Renew describes; gone is the kind of "not ours any more".
func (l *kubeLease) write(ctx context.Context, op string, gone error, change func(*coordv1.Lease)) error {
	s := l.s
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	what := op + " " + l.info.Name
	for range 3 {
		if s.closed.Load() {
			return s.classify("update", what, errClosed)
		}
		next := l.last.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		change(next)
		got, err := s.leases.Update(cctx, next, metav1.UpdateOptions{})
		if err == nil {
			l.last = got
			return nil
		}
		if apierrors.IsNotFound(err) {
			return lease.NewError(fmt.Sprintf("%s no longer has the Lease object of %s (it was deleted)", s.cfg.where, l.info.Name), gone)
		}
		if !apierrors.IsConflict(err) {
			return s.classify("update", what, err)
		}
		cur, _, err := s.read(cctx, what, l.info.Name)
		if err != nil {
			return err
		}
		if cur == nil {
			return lease.NewError(fmt.Sprintf("%s no longer has the Lease object of %s (it was deleted)", s.cfg.where, l.info.Name), gone)
		}
		if r := readRecord(cur); r.holder != l.info.Label || r.id != l.info.ID || r.token != l.info.Token {
			return lease.NewError(fmt.Sprintf("%s: the Lease %s no longer names us (released, taken over by %q, or edited)", s.cfg.where, l.info.Name, r.holder), gone)
		}
		l.last = cur // still ours: write again on this version
	}
	return lease.NewError(fmt.Sprintf("%s: %s: the Lease object kept changing under us", s.cfg.where, what), lease.ErrUnavailable)
}

func ptr[T any](v T) *T { return &v }

func ptrVal[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
