package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// lostLease is a lease that can tell it was lost, as the file store's lock
// file watch does.
type lostLease struct {
	lease.Lease
	lost chan struct{}
}

func (l lostLease) Lost() <-chan struct{} { return l.lost }

// A lease that reports itself lost ends leadership at once, without any
// renewal being due (the fake clock never moves), with Renew's reason as
// the cause.
func TestKeeperStopsWhenLeaseReportsLost(t *testing.T) {
	r := newRig(t)
	ll := lostLease{Lease: r.l, lost: make(chan struct{})}
	r.l = ll
	k := r.keep(t, r.clock.Now())
	r.store.OnRenew = func(ctx context.Context, id string) error {
		return lease.NewError("lock file gone", lease.ErrLost)
	}
	close(ll.lost)
	select {
	case <-k.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the keeper did not stop after the lease reported itself lost")
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, lease.ErrLost) || cause.Error() != "lock file gone" {
		t.Fatalf("cause = %v; want Renew's lost error", cause)
	}
}
