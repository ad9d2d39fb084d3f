package lease

import (
	"context"
	"time"
)

// Holding is part of every Lease: it can be given up "late": the holder's job is done, but the lease must stay taken for a
// while longer (leaderrun --hold-at-least, "lock at least for" in job-lock
// libraries) so that the same scheduled run on another host, whose clock or
// cron fired a little later, finds it taken. The store keeps the hold by
// itself; no process of the holder stays alive for it.
//
// A hold is not a safety property: nobody renews the lease during the hold
// and no fencing token is issued for it. It only delays the next
// acquisition.
type Holding interface {
	// ReleaseHeld gives the lease up so that it stays taken for hold from
	// now and then becomes free by itself; waiters wake when it does. A
	// hold that is not positive releases at once. Every store keeps a hold
	// of any length (callers bound it: leaderrun at 31 days). Like
	// Lease.Release it returns an error wrapping ErrNotHeld (or ErrLost)
	// when the lease was no longer ours.
	ReleaseHeld(ctx context.Context, hold time.Duration) error
}
