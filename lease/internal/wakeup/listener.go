package wakeup

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// A Listener keeps one subscription to a store's release notifications (a
// Redis channel, a PostgreSQL LISTEN) and turns each into a wake-up of the
// waiters for that lease name. The subscription is a hint only: Run re-makes
// it with backoff when it drops, and while it is down waiters sleep by the
// holder's remaining time. The store supplies the transport; the Listener is
// the state machine around it, shared by redislease and pglease.
//
// A Wait uses it in this order: Register (the channel the next release
// closes), Await (is the subscription up?), Quiet (can the remaining time
// the caller's failed attempt reported stand without another read?), and
// Remember when it returns.
type Listener struct {
	t          Transport
	wakeOnDrop bool

	mu      sync.Mutex
	up      bool          // the store confirmed the subscription
	upCh    chan struct{} // closed when up becomes true, or when an attempt failed before it; then replaced
	failed  bool          // the last attempt failed before it was up: do not make waiters wait for it
	wasUp   bool          // the current attempt came up
	waiters map[string]chan struct{}
	// seq counts notifications and (re)subscriptions; lastSeen[name] is seq
	// when name's last Wait returned with the subscription up.
	seq      uint64
	lastSeen map[string]uint64
}

// A Transport is a store's side of a Listener.
type Transport interface {
	// Serve makes one subscription and reads it until it fails or ctx is
	// done, and returns why it ended. It calls l.Up once the store has
	// confirmed the subscription, and l.Notify(name) for each release of
	// name it reads.
	Serve(ctx context.Context, l *Listener) error
	// Retry is told why a subscription ended (after the Listener recorded
	// it: waiters no longer count on it). It returns the pause before the
	// next attempt (b.Next() for the usual backoff, which the Listener
	// resets after an attempt that was up), or false to stop for good.
	Retry(err error, b *Backoff) (pause time.Duration, again bool)
}

// New returns a Listener over t; Run starts it. With wakeOnDrop, the loss of
// a subscription that was up wakes every registered waiter to re-check,
// since a release may have gone unnoticed; without it they sleep on by the
// remaining time they read, until the subscription is back up (Up wakes
// them then).
func New(t Transport, wakeOnDrop bool) *Listener {
	return &Listener{t: t, wakeOnDrop: wakeOnDrop, upCh: make(chan struct{}),
		waiters: map[string]chan struct{}{}, lastSeen: map[string]uint64{}}
}

// Run subscribes, serves until the subscription fails, and starts over
// after the pause Retry gives, until life is cancelled or Retry says stop.
// Its caller owns the goroutine that runs it.
func (l *Listener) Run(life context.Context) {
	var b Backoff
	for life.Err() == nil {
		err := l.t.Serve(life, l)
		wasUp := l.drop()
		if life.Err() != nil {
			return
		}
		if wasUp {
			b.Reset()
		}
		pause, again := l.t.Retry(err, &b)
		if !again {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-life.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Register returns the channel that the next release of name closes.
func (l *Listener) Register(name string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := l.waiters[name]
	if ch == nil {
		ch = make(chan struct{})
		l.waiters[name] = ch
	}
	return ch
}

// Await waits at most timeout (or until ctx is done) for the subscription to
// be up, unless the last attempt failed before it was; it reports whether
// the subscription is up.
func (l *Listener) Await(ctx context.Context, timeout time.Duration) bool {
	l.mu.Lock()
	if l.up || l.failed {
		defer l.mu.Unlock()
		return l.up
	}
	upCh := l.upCh
	l.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-upCh:
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// Quiet reports whether the subscription has been up, with no release
// notified and no re-subscription, since name's previous Wait returned:
// then nothing was missed since, and the remaining time the caller's failed
// attempt reported stands.
func (l *Listener) Quiet(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen, ok := l.lastSeen[name]
	return l.up && ok && seen == l.seq
}

// Remember records, at the end of a Wait for name, what the subscription
// had seen, for the next Wait's Quiet.
func (l *Listener) Remember(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up {
		l.lastSeen[name] = l.seq
	} else {
		delete(l.lastSeen, name)
	}
}

// Up is the transport's report that the store confirmed the subscription.
// Every registered waiter wakes to re-check: it registered while the
// subscription was down (a first Wait that did not await it, or a drop),
// so a release since its last read went unnoticed. (A standby whose first
// subscription came up just after the release slept by the holder's
// remaining time, and a lower-ranked one took the lease before it.)
func (l *Listener) Up() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = false
	if !l.up {
		l.up, l.wasUp = true, true
		l.seq++ // releases may have gone unnoticed while it was down
		close(l.upCh)
		l.upCh = make(chan struct{})
		for name, ch := range l.waiters {
			close(ch)
			delete(l.waiters, name)
		}
	}
}

// Notify is the transport's report of a release of name: its waiters wake.
func (l *Listener) Notify(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if ch := l.waiters[name]; ch != nil {
		close(ch)
		delete(l.waiters, name)
	}
}

// drop records the end of a subscription attempt and reports whether it had
// come up. Waiters blocked in Await after a failed attempt are released at
// once (they fall back to the remaining time); after one that was up, with
// wakeOnDrop, every registered waiter wakes.
func (l *Listener) drop() (wasUp bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wasUp, l.wasUp = l.wasUp, false
	l.up = false
	clear(l.lastSeen)
	if !wasUp {
		l.failed = true
		close(l.upCh)
		l.upCh = make(chan struct{})
		return false
	}
	if l.wakeOnDrop {
		for name, ch := range l.waiters {
			close(ch)
			delete(l.waiters, name)
		}
	}
	return true
}

// Backoff paces subscription attempts: from minBackoff, doubling up to
// maxBackoff, each pause jittered by up to half again. The zero value starts
// at minBackoff.
type Backoff struct{ next time.Duration }

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Next returns the pause before the next attempt and doubles the one after.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = minBackoff
	}
	p := b.next + rand.N(b.next/2+1)
	b.next = min(2*b.next, maxBackoff)
	return p
}

// Reset starts the pauses over from minBackoff.
func (b *Backoff) Reset() { b.next = minBackoff }
