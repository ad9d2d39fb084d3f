package redislease

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
	"github.com/redis/go-redis/v9"
)

// Waiting (docs/design.md, waiting for the lease). A waiter sleeps until the record's PTTL runs out, plus
// a little jitter, and wakes early when the holder publishes a clean release.
// The subscription is a hint only: it is made once per Store and name, kept
// across Wait calls by a goroutine the Store owns, and re-made with backoff
// when it drops; while it is down waiters simply sleep by PTTL.

const (
	// noTTLPoll is how often a waiter re-checks a record that has no TTL
	// (written by hand) or whose PTTL it could not read.
	noTTLPoll = 2 * time.Second
	// healthEvery is how long the subscription may stay silent before it is
	// pinged; an unanswered ping means a dead connection, which is re-made.
	// While it is dead waiters still wake by TTL, so this only bounds how long
	// a clean release may go unnoticed; it is long so that idle waiters cost
	// the server almost nothing.
	healthEvery = 60 * time.Second
	// maxResubscribe caps the backoff between subscription attempts.
	maxResubscribe = 5 * time.Second
	// noChannelPoll is how often a waiter re-reads PTTL when the server
	// refuses us the release channel (an ACL user without &leaderrun:*):
	// the handover then takes up to this long instead of one round trip.
	noChannelPoll = 200 * time.Millisecond
)

// Wait blocks until the lease may have become free: the record's PTTL ran
// out, a release was published, or (when the PTTL cannot be read) a short
// poll interval passed. It returns nil to mean "try again", or ctx's error.
// The first Wait for a name subscribes to its release channel (bounded by
// the call timeout) and then reads PTTL, so a release between the caller's
// TryAcquire and the subscription is seen as PTTL -2 and returns at once.
func (s *Store) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := s.watch(name)
	var wake <-chan struct{}
	var seq uint64
	if w != nil {
		wake, seq = w.await(ctx, s.callTimeout)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A release between the caller's failed attempt and now is either seen
	// by the sequence number (the subscription was up since the previous
	// Wait) or by reading PTTL (first Wait, or the subscription is new).
	var d time.Duration
	if w != nil && wake != nil && w.seenBefore(seq) {
		if held == nil || held.By.Remaining <= 0 {
			d = noTTLPoll
		} else {
			d = held.By.Remaining
		}
	} else {
		var err error
		d, err = s.pttl(ctx, name)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.log.Debug("cannot read the lease's PTTL; polling", "name", name, "err", err)
			d = wakeup.Poll(held, noTTLPoll)
		case d == -2*time.Millisecond: // no record: free now
			return nil
		case d < 0: // a record without TTL: not ours to expire
			d = noTTLPoll
		}
	}
	if w != nil {
		// A release after await closes wake, which wakeup.Sleep sees.
		defer w.remember()
	}
	if wake == nil && s.noChannel.Load() {
		d = min(d, noChannelPoll)
	}
	// wake is nil (never fires) while there is no subscription.
	return wakeup.Sleep(ctx, d, wake)
}

// pttl returns the record's remaining TTL; -2ms when there is no record and
// -1ms when it has no TTL (PTTL's own codes, in milliseconds).
func (s *Store) pttl(ctx context.Context, name string) (time.Duration, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	n, err := s.client.Do(cctx, "PTTL", recordKey(name)).Int64()
	if err != nil {
		return 0, s.classify("pttl "+name, err)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// watch returns the name's watcher, starting it on first use; nil after Close.
func (s *Store) watch(name string) *watcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if w := s.watchers[name]; w != nil {
		return w
	}
	w := &watcher{s: s, channel: releaseChan(name), upCh: make(chan struct{}), wake: make(chan struct{})}
	s.watchers[name] = w
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		w.run(s.life)
	}()
	return w
}

// watcher keeps one subscription to a release channel and turns each
// message into a broadcast: it closes wake and makes a new one.
type watcher struct {
	s       *Store
	channel string

	mu     sync.Mutex
	ps     *redis.PubSub // the current subscription; nil between attempts
	up     bool          // the server confirmed the subscription
	upCh   chan struct{} // closed when up becomes true; replaced when it drops
	failed bool          // the last attempt failed before it was up: do not make waiters wait for it
	wake   chan struct{} // closed on a release message; then replaced
	closed bool
	// seq counts release messages and (re)subscriptions; lastSeen is seq
	// when the last Wait returned, valid if remembered.
	seq        uint64
	lastSeen   uint64
	remembered bool
}

// await returns the channel that the next release message closes, and the
// sequence number of the last one, once the subscription is confirmed; it
// waits for that at most timeout (or ctx) and returns a nil channel when the
// subscription is not up, so the caller relies on PTTL.
func (w *watcher) await(ctx context.Context, timeout time.Duration) (<-chan struct{}, uint64) {
	w.mu.Lock()
	if w.up {
		defer w.mu.Unlock()
		return w.wake, w.seq
	}
	if w.failed {
		w.mu.Unlock()
		return nil, 0
	}
	upCh := w.upCh
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-upCh:
	case <-t.C:
		return nil, 0
	case <-ctx.Done():
		return nil, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.up {
		return nil, 0
	}
	return w.wake, w.seq
}

// seenBefore reports whether a previous Wait already saw sequence number
// seq with the subscription up: then nothing was missed since it returned.
func (w *watcher) seenBefore(seq uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.remembered && w.lastSeen == seq
}

// remember records the current sequence number at the end of a Wait.
func (w *watcher) remember() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastSeen, w.remembered = w.seq, w.up
}

// run subscribes, serves messages until the subscription fails, and starts
// over after a backoff, until life is cancelled.
func (w *watcher) run(life context.Context) {
	backoff := 100 * time.Millisecond
	for life.Err() == nil {
		ps := w.s.client.Subscribe(life, w.channel)
		if !w.setPS(ps) {
			_ = ps.Close()
			return
		}
		wasUp, err := w.serve(life, ps)
		noPerm := redis.IsPermissionError(err)
		if noPerm {
			// The user may not use the channel: waiters poll PTTL instead.
			// Set before drop wakes the waiters blocked in await, so they
			// see it.
			w.s.noChannel.Store(true)
		}
		w.drop(ps)
		_ = ps.Close()
		if life.Err() != nil {
			return
		}
		if noPerm {
			w.s.log.Debug("no permission to subscribe to the release channel; waiters poll (grant &leaderrun:* for instant handover)", "channel", w.channel, "err", w.s.classify("subscribe", err))
			return
		}
		if wasUp {
			backoff = 100 * time.Millisecond
		}
		w.s.log.Debug("release subscription dropped; waiters fall back to PTTL", "channel", w.channel, "err", w.s.classify("subscribe", err))
		t := time.NewTimer(backoff + rand.N(backoff/2+1))
		select {
		case <-life.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxResubscribe)
	}
}

// serve reads the subscription until it fails; it reports whether the
// server confirmed the subscription before that.
func (w *watcher) serve(life context.Context, ps *redis.PubSub) (wasUp bool, err error) {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(life, healthEvery)
		if err != nil {
			var ne net.Error
			if life.Err() == nil && !pinged && errors.As(err, &ne) && ne.Timeout() {
				cctx, cancel := context.WithTimeout(life, w.s.callTimeout)
				err = ps.Ping(cctx)
				cancel()
				if err != nil {
					return wasUp, err
				}
				pinged = true
				continue
			}
			return wasUp, err
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == w.channel {
				wasUp = true
				w.markUp()
			}
		case *redis.Message:
			w.notify()
		}
	}
}

func (w *watcher) setPS(ps *redis.PubSub) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.ps = ps
	return true
}

func (w *watcher) markUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failed = false
	if !w.up {
		w.up = true
		w.seq++ // messages may have been lost while it was down
		close(w.upCh)
	}
}

func (w *watcher) drop(ps *redis.PubSub) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ps == ps {
		w.ps = nil
	}
	if w.up {
		w.up = false
		w.remembered = false
		w.upCh = make(chan struct{})
	} else {
		// The attempt failed before it was up: release the waiters blocked in
		// await now rather than at their timeout; they fall back to PTTL.
		w.failed = true
		close(w.upCh)
		w.upCh = make(chan struct{})
	}
}

func (w *watcher) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	close(w.wake)
	w.wake = make(chan struct{})
}

// close stops the current subscription, which unblocks run's read; run then
// sees life cancelled and returns.
func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.ps != nil {
		_ = w.ps.Close()
	}
}
