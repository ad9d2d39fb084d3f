package kubelease

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Standbys. Each registered standby of a lease is a Lease object of its
// own, NAME's object name + ".lr--standby-" + the first 16 hex digits of its
// candidacy ID, labelled leaderrun/role=standby and leaderrun/of=a hash
// of the lease's object name (so one label selector lists them), with the
// standby's label as holderIdentity, its wait start as acquireTime, its
// priority and full ID in annotations, and its expiry as renewTime +
// leaseDurationSeconds. The API server expires nothing, so liveness is
// judged by the wall clock, which is good enough for a registry that is
// never needed for safety (see lease.CandidateRegistry); a registration
// lapsed for a minute is deleted by whoever lists it. Standby objects are
// separate from the lease's own object because every write to that one
// restarts the waiters' expiry clocks.

// heartbeatsPerSecond bounds the registration refreshes of one lease's
// standbys together: each refresh is an update and a list.
const heartbeatsPerSecond = 3

// annPriority is a standby's priority annotation.
const annPriority = "leaderrun/priority"

// lapsedFor is how long after its expiry a standby object is deleted.
const lapsedFor = time.Minute

var _ lease.CandidateRegistry = (*Store)(nil)

func standbyName(name, id string) string {
	if len(id) > 16 {
		id = id[:16]
	}
	return auxName(name, "standby-"+id)
}

func standbySelector(name string) string {
	return labelRole + "=standby," + labelOf + "=" + hashOf(objName(name))
}

// Join registers c, or refreshes its registration, for expiry (whole
// seconds, rounded up): an unconditional update of its object (a create
// when there is none), then a list of the live standbys.
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if s.closed.Load() {
		return 0, s.classify("update", "join standbys of "+name, errClosed)
	}
	secs := int32(max((expiry+time.Second-1)/time.Second, 1))
	since, now := metav1.NewMicroTime(c.Since), metav1.NewMicroTime(time.Now())
	o := &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        standbyName(name, c.ID),
			Labels:      map[string]string{labelRole: "standby", labelOf: hashOf(objName(name)), labelManaged: "leaderrun"},
			Annotations: map[string]string{annID: c.ID, annName: name, annPriority: strconv.Itoa(c.Priority)},
		},
		Spec: coordv1.LeaseSpec{HolderIdentity: &c.Label, LeaseDurationSeconds: &secs, AcquireTime: &since, RenewTime: &now},
	}
	err := s.upsert(cctx, o)
	if err != nil {
		return 0, s.classify("update", "join standbys of "+name, err)
	}
	cs, err := s.standbys(cctx, name, "")
	if err != nil {
		return 0, err
	}
	return max(len(cs), 1), nil
}

// upsert writes the standby object o: an update on the version our last
// write made (the store remembers it), else on the version a read finds,
// else a create. Leases take no unconditional update.
func (s *Store) upsert(ctx context.Context, o *coordv1.Lease) error {
	o.ResourceVersion = s.regs.get(o.Name)
	for range 3 {
		var (
			got *coordv1.Lease
			err error
		)
		if o.ResourceVersion == "" {
			got, err = s.leases.Create(ctx, o, metav1.CreateOptions{})
		} else {
			got, err = s.leases.Update(ctx, o, metav1.UpdateOptions{})
		}
		if err == nil {
			s.regs.set(o.Name, got.ResourceVersion)
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		cur, gerr := s.leases.Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			o.ResourceVersion = ""
		case gerr != nil:
			return gerr
		default:
			o.ResourceVersion = cur.ResourceVersion
		}
	}
	return lease.NewError("the standby's object kept changing", lease.ErrUnavailable)
}

// registrations maps our standby objects to the version of our last write.
type registrations struct {
	mu sync.Mutex
	rv map[string]string
}

func (r *registrations) get(obj string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rv[obj]
}

func (r *registrations) set(obj, rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rv == nil {
		r.rv = make(map[string]string)
	}
	if rv == "" {
		delete(r.rv, obj)
	} else {
		r.rv[obj] = rv
	}
}

// Leave deletes the standby's object, after Leave returns (on the store's
// background group, which Close waits for); a failure leaves it to lapse.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	obj := standbyName(name, id)
	s.regs.set(obj, "")
	s.bg.Go(func() {
		cctx, cancel := s.callCtx(context.WithoutCancel(ctx))
		defer cancel()
		err := s.leases.Delete(cctx, obj, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.log.Debug("leaving the standbys failed; the registration lapses by itself", "err", s.classify("delete", "leave standbys of "+name, err))
		}
	})
	return nil
}

// Candidates lists the live standbys (the holder's own registration left
// out) in takeover order, and the holder (nil when the lease looks free by
// this Store's count or by the wall clock, see Status), with the time left
// before either would judge the holder gone.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	cur, _, err := s.read(cctx, "standbys of "+name, name)
	if err != nil {
		return nil, nil, err
	}
	var h *lease.Holder
	holderID := ""
	if cur != nil {
		// Held as both this Store's count and the wall clock say: either
		// saying free costs at most one attempt that TryAcquire refuses.
		r := readRecord(cur)
		if wh, left := wallView(name, cur, r, time.Now()); wh != nil && !s.free(name, cur, r) {
			mono := max(s.expiresAt(name, cur, r)-s.clock.Now(), 0)
			if left > 0 {
				mono = min(mono, left)
			}
			wh.Remaining = mono
			h, holderID = wh, r.id
		}
	}
	cs, err := s.standbys(cctx, name, holderID)
	if err != nil {
		return nil, nil, err
	}
	return cs, h, nil
}

// standbys lists the live registrations of name but skip's, sorted, and
// deletes (in the background, conditional on their version) those lapsed
// for lapsedFor.
func (s *Store) standbys(ctx context.Context, name, skip string) ([]lease.Candidate, error) {
	ll, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: standbySelector(name)})
	if err != nil {
		return nil, s.classify("list", "standbys of "+name, err)
	}
	now := time.Now()
	var cs []lease.Candidate
	for i := range ll.Items {
		o := &ll.Items[i]
		c, until, ok := candidateOf(o)
		switch {
		case !ok || c.ID == skip:
		case now.Before(until):
			c.Remaining = until.Sub(now)
			cs = append(cs, c)
		case now.After(until.Add(lapsedFor)):
			s.dropLapsed(o.Name, o.ResourceVersion)
		}
	}
	lease.SortCandidates(cs)
	return cs, nil
}

// candidateOf reads a standby object: the candidate and when it lapses.
func candidateOf(o *coordv1.Lease) (lease.Candidate, time.Time, bool) {
	sp := o.Spec
	if sp.HolderIdentity == nil || sp.LeaseDurationSeconds == nil || sp.RenewTime == nil || o.Annotations[annID] == "" {
		return lease.Candidate{}, time.Time{}, false
	}
	c := lease.Candidate{ID: o.Annotations[annID], Label: *sp.HolderIdentity}
	c.Priority, _ = strconv.Atoi(o.Annotations[annPriority])
	if sp.AcquireTime != nil {
		c.Since = sp.AcquireTime.Time
	}
	return c, sp.RenewTime.Add(time.Duration(*sp.LeaseDurationSeconds) * time.Second), true
}

// dropLapsed deletes a lapsed standby object if it is still at version rv.
func (s *Store) dropLapsed(obj, rv string) {
	s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
		defer cancel()
		_ = s.leases.Delete(ctx, obj, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	})
}

// CandidateTiming: refreshes are an update and a list; δ as on etcd.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	return lease.CandidateTiming{Heartbeat: true, PerSecond: heartbeatsPerSecond, MinInterval: time.Second, Step: 200 * time.Millisecond}
}
