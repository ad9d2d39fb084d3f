// Package wakeup holds the sleeping half of a network store's Wait (docs/design.md,
// waiting for the lease), shared by redislease, pglease and etcdlease: sleep until the
// holder's remaining time runs out, plus a little jitter so that waiters on
// the same expiry do not wake at once, or until a release notification, or
// until the caller gives up. A broken notification channel is a nil wake
// channel, which never fires: the waiter then wakes by time alone. The
// Listener is the notifying half that redislease and pglease share: one
// subscription kept up with backoff, whose release notifications close the
// waiters' wake channels; each store supplies only its transport.
package wakeup

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Jitter spreads waiters that wake on the same expiry: 1ms plus up to 5% of
// d, at most 25ms more.
func Jitter(d time.Duration) time.Duration {
	spread := min(d/20, 25*time.Millisecond)
	j := time.Millisecond
	if spread > 0 {
		j += rand.N(spread)
	}
	return j
}

// Sleep waits d plus Jitter(d), or until wake is closed (a nil wake never
// is), or until ctx is done. It returns nil to mean "try again", or ctx's
// error.
func Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d + Jitter(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-wake:
		return nil
	}
}

// Poll is how long to sleep when the store could not say how long the lease
// has left: poll, or less when the holder's remaining time as the failed
// attempt reported it (held, which may be nil) is known and shorter.
func Poll(held *lease.HeldError, poll time.Duration) time.Duration {
	if held != nil && held.By.Remaining > 0 && held.By.Remaining < poll {
		return held.By.Remaining
	}
	return poll
}

// UnreadPoll is how long a waiter sleeps, at most, when the store did not
// answer its read of the lease (Unread).
const UnreadPoll = 2 * time.Second

// Unread is how long a waiter sleeps when its read of the lease failed with
// err (the store did not answer): Poll(held, UnreadPoll), so the caller's
// next attempt reports the failure. It returns ctx's error instead when ctx
// ended, which is then why the read failed.
func Unread(ctx context.Context, log *slog.Logger, name string, held *lease.HeldError, err error) (time.Duration, error) {
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	log.Debug("cannot read the lease; waiting a short while", "name", name, "err", err)
	return Poll(held, UnreadPoll), nil
}

// Soonest is a watch's timer: when the first of the holder's and the
// standbys' times left (as Status and Candidates read them) runs out, plus
// slack; nil when none is known. Stop the timer when done with it.
func Soonest(h *lease.Holder, cands []lease.Candidate, slack time.Duration) *time.Timer {
	due := time.Duration(-1)
	at := func(d time.Duration) {
		if d > 0 && (due < 0 || d < due) {
			due = d
		}
	}
	if h != nil {
		at(h.Remaining)
	}
	for _, cd := range cands {
		at(cd.Remaining)
	}
	if due < 0 {
		return nil
	}
	return time.NewTimer(due + slack)
}
