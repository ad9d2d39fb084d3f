package redislease

import (
	"context"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
	"github.com/redis/go-redis/v9"
)

var _ lease.ChangeWatcher = (*Store)(nil)

// WatchChanges subscribes to the lease's release and changed channels. Every
// change that leaderrun makes is announced on one of them (an acquisition,
// a release, a standby joining or leaving); the two that nobody announces —
// a lease or a standby lapsing — happen at times the last reading tells
// (the holder's PTTL, each standby's expiry), and Next wakes then. When the
// channels cannot be used (no permission, server down) Next wakes only at
// those times, and the caller's own polling covers the rest.
func (s *Store) WatchChanges(ctx context.Context, name string) (lease.Changes, error) {
	c := &changes{}
	if s.noChannel.Load() {
		return c, nil
	}
	ps := s.client.Subscribe(ctx, releaseChan(name), changedChan(name))
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	for confirmed := 0; confirmed < 2; {
		msg, err := ps.Receive(cctx)
		if err != nil {
			if redis.IsPermissionError(err) {
				s.noChannel.Store(true)
			}
			s.log.Debug("watch: cannot subscribe to the lease's channels; checking at expiry times and by polling", "err", s.classify("subscribe", err))
			_ = ps.Close()
			return c, nil
		}
		if _, ok := msg.(*redis.Subscription); ok {
			confirmed++
		}
	}
	c.ps = ps
	c.msgs = ps.Channel(redis.WithChannelHealthCheckInterval(healthEvery))
	return c, nil
}

// expirySlack is how long after a lease's or standby's computed expiry Next
// wakes: Redis removes a key at its expiry time, to the millisecond.
const expirySlack = 5 * time.Millisecond

// changes is a watch on one lease; ps is nil without a subscription.
type changes struct {
	ps   *redis.PubSub
	msgs <-chan *redis.Message
}

// Next returns on a message on the lease's channels, when the holder's TTL
// or a standby's registration runs out, or when ctx ends.
func (c *changes) Next(ctx context.Context, h *lease.Holder, cands []lease.Candidate) error {
	var timer <-chan time.Time // nil: no time left known
	if t := wakeup.Soonest(h, cands, expirySlack); t != nil {
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer:
		return nil
	case _, ok := <-c.msgs: // nil without a subscription: never ready
		if !ok {
			c.msgs = nil
		}
		// Coalesce a burst (a release and the next acquisition).
		for c.msgs != nil {
			select {
			case _, ok := <-c.msgs:
				if !ok {
					c.msgs = nil
				}
				continue
			default:
			}
			return nil
		}
		return nil
	}
}

// Close ends the subscription and its reader.
func (c *changes) Close() error {
	if c.ps != nil {
		return c.ps.Close()
	}
	return nil
}
