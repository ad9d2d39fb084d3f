// Package turns holds the one connection that each SQL store (pglease,
// mysqllease) keeps to its server, and on which the store's calls take
// turns: a holder keeps it open for its renewals; a waiting instance closes
// it between its checks and heartbeats (Idle, Disconnect), so that a fleet
// of standbys does not hold a connection each (docs/standbys.md).
//
// A Conn knows nothing of the store's protocol: the store opens the
// connection, runs its statements on it, classifies its errors and
// decides when a failed one must go (Drop), all while it has the turn
// (between Take and Give). C is the store's connection type, a pointer;
// its zero value (nil) means none.
package turns

import (
	"context"
	"sync/atomic"
)

// Conn is a store's one connection and the turns its calls take on it. The
// zero value is not usable: use New.
type Conn[C comparable] struct {
	sem  chan struct{} // one token: whoever holds it owns conn
	conn C             // zero until connected, and after a broken connection
	// queued counts the calls waiting for sem: a waiting instance's
	// connection is not closed under a call about to use it.
	queued atomic.Int32
	drop   func(C) // closes a connection for good, at once

	life   context.Context // cancelled by Shut
	stop   context.CancelFunc
	closed atomic.Bool

	// held counts the leases acquired and not yet released: while one is,
	// the connection stays open for its renewals.
	held atomic.Int64
}

// New returns a Conn without a connection. drop closes a connection for
// good and at once (Drop, Disconnect): one that failed may be mid message,
// and a waiting instance's must not wait for the server to read a goodbye.
func New[C comparable](drop func(C)) *Conn[C] {
	life, stop := context.WithCancel(context.Background())
	return &Conn[C]{sem: make(chan struct{}, 1), drop: drop, life: life, stop: stop}
}

// Take waits for the turn, at most until ctx is done (then it returns
// ctx's error). While it waits, the call counts as queued, so Disconnect
// leaves the connection to it. A nil return means the caller has the turn
// and must Give it back.
func (t *Conn[C]) Take(ctx context.Context) error {
	t.queued.Add(1)
	select {
	case t.sem <- struct{}{}:
		t.queued.Add(-1)
		return nil
	case <-ctx.Done():
		t.queued.Add(-1)
		return ctx.Err()
	}
}

// Give gives the turn back.
func (t *Conn[C]) Give() { <-t.sem }

// Get returns the connection (the zero C when there is none), for a caller
// that has the turn.
func (t *Conn[C]) Get() C { return t.conn }

// Set makes c the connection, for a caller that has the turn and whose
// connection is closed or none.
func (t *Conn[C]) Set(c C) { t.conn = c }

// Drop closes the connection, if any, for good, for a caller that has the
// turn; the next call makes a new one.
func (t *Conn[C]) Drop() {
	var none C
	if t.conn != none {
		t.drop(t.conn)
		t.conn = none
	}
}

// Disconnect closes the connection, if any, unless another call is
// already waiting for it (that call then uses it, and closes it in its
// turn: every call of a waiting instance ends with Idle or Disconnect);
// the next call makes a new one. After Shut it does not wait for the turn.
func (t *Conn[C]) Disconnect() {
	select {
	case t.sem <- struct{}{}:
	case <-t.life.Done():
		return
	}
	defer t.Give()
	if t.queued.Load() == 0 {
		t.Drop()
	}
}

// Idle is Disconnect when no lease is held: a standby keeps no connection
// between its checks and heartbeats, a holder keeps it for its renewals.
func (t *Conn[C]) Idle() {
	if !t.Held() {
		t.Disconnect()
	}
}

// Held reports whether a lease is held (Hold, and not Done yet).
func (t *Conn[C]) Held() bool { return t.held.Load() != 0 }

// Hold counts an acquired lease among those held until its Done.
func (t *Conn[C]) Hold() *Lease {
	t.held.Add(1)
	return &Lease{held: &t.held}
}

// Lease is one acquired lease counted as held (Hold).
type Lease struct {
	held *atomic.Int64
	done atomic.Bool
}

// Done counts the lease out of the held ones, once (a release, a release
// with a hold). On nil, a lease never counted as held, it does nothing.
func (l *Lease) Done() {
	if l != nil && l.done.CompareAndSwap(false, true) {
		l.held.Add(-1)
	}
}

// Life is cancelled by Shut: the store's goroutines may live under it.
func (t *Conn[C]) Life() context.Context { return t.life }

// Closed reports whether Shut was called.
func (t *Conn[C]) Closed() bool { return t.closed.Load() }

// Shut marks the store closed and cancels Life; it reports whether this
// was the first call (a store's Close is idempotent). Calls that take the
// turn afterwards are to report the store closed, and Disconnect no
// longer waits for the turn.
func (t *Conn[C]) Shut() bool {
	if !t.closed.CompareAndSwap(false, true) {
		return false
	}
	t.stop()
	return true
}

// CloseConn waits for a call in progress (bounded by its timeout), closes
// the connection, if any, with close, and gives the turn back: the end of
// a store's Close, after Shut. close may take its time (a goodbye to the
// server), unlike New's drop.
func (t *Conn[C]) CloseConn(close func(C)) {
	t.sem <- struct{}{}
	defer t.Give()
	var none C
	if t.conn != none {
		close(t.conn)
		t.conn = none
	}
}
