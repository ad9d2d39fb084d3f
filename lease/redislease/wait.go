package redislease

import (
	"context"
	"errors"
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
	// (written by hand), as one whose PTTL it could not read.
	noTTLPoll = wakeup.UnreadPoll
	// healthEvery is how long the subscription may stay silent before it is
	// pinged; an unanswered ping means a dead connection, which is re-made.
	// While it is dead waiters still wake by TTL, so this only bounds how long
	// a clean release may go unnoticed; it is long so that idle waiters cost
	// the server almost nothing.
	healthEvery = 60 * time.Second
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
	var (
		wake <-chan struct{}
		up   bool
	)
	if w != nil {
		// wake fires on a release the subscription reports, and when the
		// subscription comes up (a release before it went unnoticed).
		wake = w.Register(name)
		if up = w.Await(ctx, s.callTimeout); up {
			// If it came up just now, it woke the channel above; the state
			// is read below then (not Quiet), so the fresh channel misses
			// nothing.
			wake = w.Register(name)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A release between the caller's failed attempt and now is either seen
	// by the listener (the subscription was up since the previous Wait) or
	// by reading PTTL (first Wait, or the subscription is new).
	var d time.Duration
	if up && w.Quiet(name) {
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
			if d, err = wakeup.Unread(ctx, s.log, name, held, err); err != nil {
				return err
			}
		case d == -2*time.Millisecond: // no record: free now
			return nil
		case d < 0: // a record without TTL: not ours to expire
			d = noTTLPoll
		}
	}
	if w != nil {
		// A release after Register closes wake, which wakeup.Sleep sees.
		defer w.Remember(name)
	}
	if !up && s.noChannel.Load() {
		d = min(d, noChannelPoll)
	}
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
	w := &watcher{s: s, name: name, channel: releaseChan(name)}
	w.Listener = wakeup.New(w, false)
	s.watchers[name] = w
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		w.Run(s.life)
	}()
	return w
}

// watcher is the transport of one name's wakeup.Listener: a subscription to
// its release channel. A lost subscription does not wake the waiters: they
// sleep on by the PTTL they read.
type watcher struct {
	*wakeup.Listener
	s       *Store
	name    string
	channel string

	mu     sync.Mutex
	ps     *redis.PubSub // the current subscription; nil between attempts
	closed bool
}

// Serve subscribes and reads the subscription until it fails.
func (w *watcher) Serve(life context.Context, l *wakeup.Listener) error {
	ps := w.s.client.Subscribe(life, w.channel)
	if !w.setPS(ps) {
		_ = ps.Close()
		return redis.ErrClosed
	}
	defer func() {
		w.setPS(nil)
		_ = ps.Close()
	}()
	err := w.serve(life, ps, l)
	if redis.IsPermissionError(err) {
		// The user may not use the channel: waiters poll PTTL instead. Set
		// before the Listener wakes the waiters blocked in Await, so they
		// see it.
		w.s.noChannel.Store(true)
	}
	return err
}

// Retry stops for good when the server refused the channel, and otherwise
// backs off.
func (w *watcher) Retry(err error, b *wakeup.Backoff) (time.Duration, bool) {
	if redis.IsPermissionError(err) {
		w.s.log.Debug("no permission to subscribe to the release channel; waiters poll (grant &leaderrun:* for instant handover)", "channel", w.channel, "err", w.s.classify("subscribe", err))
		return 0, false
	}
	w.s.log.Debug("release subscription dropped; waiters fall back to PTTL", "channel", w.channel, "err", w.s.classify("subscribe", err))
	return b.Next(), true
}

// serve reads the subscription until it fails, pinging it after
// healthEvery of silence.
func (w *watcher) serve(life context.Context, ps *redis.PubSub, l *wakeup.Listener) error {
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
					return err
				}
				pinged = true
				continue
			}
			return err
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == w.channel {
				l.Up()
			}
		case *redis.Message:
			l.Notify(w.name)
		}
	}
}

// setPS records the current subscription (nil: none); false after close.
func (w *watcher) setPS(ps *redis.PubSub) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.ps = ps
	return true
}

// close stops the current subscription, which unblocks Serve's read; Run
// then sees life cancelled and returns.
func (w *watcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.ps != nil {
		_ = w.ps.Close()
	}
}
