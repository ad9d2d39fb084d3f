package objlease

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
)

// Wait blocks until the lease may have become free: the store cannot tell
// a waiter, so it reads the object, and sleeps until the record would
// expire by this Store's count or its hold ends, at most Poll (a release
// is seen within Poll). It returns nil to mean "try again", or ctx's
// error. Store failures never end it with an error: it sleeps a short
// while and says "try again", so the caller's next TryAcquire reports the
// failure.
func (s *Store) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rctx, cancel := s.callCtx(ctx)
	cur, v, err := s.read(rctx, name)
	cancel()
	if err != nil {
		d, err := wakeup.Unread(ctx, s.log, name, held, err)
		if err != nil {
			return err
		}
		return wakeup.Sleep(ctx, d, nil)
	}
	if cur == nil || s.free(name, v, cur) {
		return nil
	}
	d := min(s.expiresAt(name, v, cur)-s.clock.Now(), s.poll)
	if !cur.HeldUntil.IsZero() {
		d = min(d, time.Until(cur.HeldUntil))
	}
	return wakeup.Sleep(ctx, max(d, 0), nil)
}

// ListSlots returns the slots k ≥ 1 of lease name that have an object, in
// one listing (lease.SlotLister).
func (s *Store) ListSlots(ctx context.Context, name string) ([]int, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	keys, err := s.b.List(cctx, leaseKey(name)+"~")
	if err != nil {
		return nil, err
	}
	var ks []int
	for _, k := range keys {
		if base, slot, ok := lease.ParseSlotName(strings.TrimPrefix(k, "lease/")); ok && base == name {
			ks = append(ks, slot)
		}
	}
	slices.Sort(ks)
	return ks, nil
}
