package kubelease

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Slots (lease.Request.Slots above 1). Each slot of lease NAME is a lease
// of its own: slot 0 is NAME's Lease object, slot k the object of NAME~k.
// A lease's token is one more than the cluster's revision at its
// acquiring read, which two slots read at once share: they could mint the
// same token. So an acquisition of a slot
// first writes the counter object of NAME (OBJ.lr--token, a Lease with the
// role "tokens"), and its token is the revision of that write: etcd's
// revisions are one counter for the whole cluster, so each slot's token is
// new, above every token granted before the acquisition began (their
// writes came earlier), and survives the deletion of any of the objects.
// A lease taken without slots never touches the counter.

// counterTries bounds the compare-and-swap rounds on the counter.
const counterTries = 20

// annBumps counts the counter's writes, so that each write changes the
// object (an update that changes nothing keeps its revision).
const annBumps = "leaderrun/bumps"

// tokenName is what the counter object of the slots of lease name (a
// slot's name) records as its name (annotation leaderrun/name).
func tokenName(name string) string {
	base, _, _ := lease.ParseSlotName(name)
	return base + "~token"
}

// sharedToken writes the counter of the slots of lease name and returns
// the revision of that write: the token of the slot about to be taken.
func (s *Store) sharedToken(ctx context.Context, name string) (uint64, error) {
	cname := tokenName(name)
	base, _, _ := lease.ParseSlotName(name)
	obj := auxName(base, "token")
	op := "mint a token for " + name
	for range counterTries {
		cur, err := s.leases.Get(ctx, obj, metav1.GetOptions{})
		var got *coordv1.Lease
		switch {
		case apierrors.IsNotFound(err):
			got, err = s.leases.Create(ctx, counterObject(obj, cname), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue // created by another slot meanwhile
			}
		case err != nil:
			return 0, s.classify("get", op, err)
		case cur.Labels[labelRole] != "tokens":
			return 0, storeerr.Config("%s: the Lease %s/%s is not the token counter of %s: choose another lease name", s.cfg.where, s.cfg.namespace, obj, name)
		default:
			next := cur.DeepCopy()
			n, _ := strconv.ParseUint(next.Annotations[annBumps], 10, 64)
			next.Annotations[annBumps] = strconv.FormatUint(n+1, 10)
			now := metav1.NewMicroTime(time.Now())
			next.Spec.RenewTime = &now
			got, err = s.leases.Update(ctx, next, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				continue // written by another slot meanwhile
			}
		}
		if err != nil {
			return 0, s.classify("write", op, err)
		}
		tok, ok := rv(got.ResourceVersion)
		if !ok {
			return 0, s.errRV(got.ResourceVersion)
		}
		return tok, nil
	}
	return 0, lease.NewError(s.cfg.where+": the token counter of "+name+" kept changing under "+strconv.Itoa(counterTries)+" tries", lease.ErrUnavailable)
}

// counterObject is a new counter of the slots of a lease.
func counterObject(obj, cname string) *coordv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        obj,
			Labels:      map[string]string{labelRole: "tokens", labelManaged: "leaderrun"},
			Annotations: map[string]string{annName: cname, annBumps: "0"},
		},
		Spec: coordv1.LeaseSpec{RenewTime: &now},
	}
}

var _ lease.SlotLister = (*Store)(nil)

// ListSlots returns the slots k ≥ 1 of lease name that have a Lease object,
// held or not, in one list of the namespace's lease objects that leaderrun
// made (managed-by leaderrun, no role: not a standby, a history or a
// counter), read by their leaderrun/name annotation: a slot's object name
// is hashed ('~' is in no object name), so no selector names a lease's
// slots. One list, not a read of every slot that may exist, for status and
// watch of a lease whose slot count is not known (slot 0 free).
func (s *Store) ListSlots(ctx context.Context, name string) ([]int, error) {
	if s.closed.Load() {
		return nil, s.classify("list", "slots of "+name, errClosed)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	ll, err := s.leases.List(cctx, metav1.ListOptions{LabelSelector: labelManaged + "=leaderrun,!" + labelRole})
	if err != nil {
		return nil, s.classify("list", "slots of "+name, err)
	}
	var ks []int
	for i := range ll.Items {
		if base, k, ok := lease.ParseSlotName(ll.Items[i].Annotations[annName]); ok && base == name && k >= 1 {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return slices.Compact(ks), nil
}
