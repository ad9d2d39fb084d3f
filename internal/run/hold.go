package run

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/lease"
)

// --hold-at-least: the lease stays taken after the run, for the rest of a
// schedule slot (lease.Holding keeps it in the store).

// releaseHeld gives the lease up with a hold of hold from now (ReleaseHeld),
// or at once when hold is not positive. Errors are treated as releaseLease
// treats them. Every lease is a lease.Holding.
func releaseHeld(ld *leadership, hold time.Duration, t lease.Timing, log *slog.Logger) error {
	if hold <= 0 {
		return releaseLease(ld, t, log)
	}
	ctx, cancel := releaseContext(ld, t)
	defer cancel()
	l := ld.l
	// The end the event names is read before the call: every store counts
	// the hold from when the call reaches it, or later (a store that reads
	// its clock after the write began, Azure rounding up to whole seconds),
	// so the lease stays taken at least until this end. Read after the
	// call, it named an end up to the call's length later than the one the
	// store kept (beside stress-ng, on Kubernetes: a waiter started 32 ms
	// before the end the event named, and after the stored one).
	until := time.Now().Add(hold)
	if err := l.ReleaseHeld(ctx, hold); err != nil {
		if errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrLost) {
			log.Debug("lease was no longer ours at release", "err", err)
			return err
		}
		log.Warn("releasing the lease with its hold failed; it will expire by itself", "err", err)
		return nil
	}
	log.Info(fmt.Sprintf("lease %s released; it stays taken for %s more (--hold-at-least)", l.Info().Name, say.Duration(hold)),
		"event", "held", "held_until", until.UTC().Format(time.RFC3339Nano))
	return nil
}

// holdLeft is what remains of --hold-at-least hold, counted from the
// acquisition request sent at sentAt (a lease.BootClock reading), when the
// run ends with cause. A run that lost the lease or stepped down for its
// health check holds nothing: the lease is not ours, or a standby must take
// over at once.
func holdLeft(hold, sentAt time.Duration, cause error) time.Duration {
	if hold <= 0 || cause != nil {
		return 0
	}
	return hold - (lease.BootClock{}.Now() - sentAt)
}
