package pglease

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
)

// Waiting (docs/design.md, waiting for the lease). A waiter sleeps until the row's expiry as the server
// reports it (the remaining time is computed by the server, never from the
// client's clock), plus a little jitter, and wakes early when the holder's
// release statement NOTIFYs. The LISTEN connection is a hint only: it is
// made once per Store, kept across Wait calls by a goroutine the Store owns,
// and re-made with backoff when it drops; while it is down waiters simply
// sleep until the expiry.

const (
	// unknownPoll is how long a waiter sleeps when it could not read the
	// row's expiry (the server did not answer).
	unknownPoll = 2 * time.Second
	// healthEvery is how long the LISTEN connection may stay silent before
	// it is pinged; an unanswered ping means a dead connection, which is
	// re-made (waking every waiter to re-check).
	healthEvery = 60 * time.Second
	// maxRelisten caps the backoff between LISTEN attempts.
	maxRelisten = 5 * time.Second
)

// Wait blocks until the lease may have become free: the row's expiry passed,
// a release was notified, or (when the expiry could not be read) a short
// interval passed. It returns nil to mean "try again", or ctx's error. It
// registers for the release notification before it reads the expiry, so a
// release in between is seen either as "no row" or as the notification.
// When LISTEN has been in effect, with no notification at all, since this
// name's previous Wait returned, nothing was released since the caller's
// TryAcquire, so the remaining time that TryAcquire reported (computed by
// the server) is used without another query: a waiter costs the server one
// statement per wake-up.
func (s *Store) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed() {
		return s.classify("wait "+name, errClosed)
	}
	var wake <-chan struct{}
	// Under wait=poll there is no LISTEN to tell of a release: the expiry
	// the caller's TryAcquire reported stands, and the store's connection
	// is closed for the sleep, so a polling standby holds none.
	quiet := s.cfg.poll
	if l := s.listenUnlessPolling(); l != nil {
		wake = l.register(name)
		defer l.unregister(name)
		l.await(ctx, s.callTimeout)
		quiet = l.quietSince(name)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Between checks a waiter keeps only its LISTEN connection: the query
	// connection is closed for the sleep (a fleet of standbys must not hold
	// two connections each), and made again by the next attempt.
	if quiet && held != nil && held.By.Remaining > 0 {
		s.disconnect()
		return wakeup.Sleep(ctx, held.By.Remaining, wake)
	}
	var d time.Duration
	h, err := s.Status(ctx, name)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Debug("cannot read the lease's expiry; trying again soon", "name", name, "err", err)
		d = wakeup.Poll(held, unknownPoll)
	case h == nil:
		return nil // free now
	default:
		d = h.Remaining
	}
	s.disconnect()
	return wakeup.Sleep(ctx, d, wake)
}

// disconnect closes the store's connection, if any; the next call makes a
// new one.
func (s *Store) disconnect() {
	select {
	case s.sem <- struct{}{}:
	case <-s.life.Done():
		return
	}
	defer func() { <-s.sem }()
	if s.conn != nil {
		closeNow(s.conn)
		s.conn = nil
	}
}

// listenUnlessPolling is listen, or nil under wait=poll.
func (s *Store) listenUnlessPolling() *listener {
	if s.cfg.poll {
		return nil
	}
	return s.listen()
}

// listen returns the store's listener, starting it on first use; nil after
// Close. The caller unregisters when its Wait ends.
func (s *Store) listen() *listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.lis == nil {
		life, stop := context.WithCancel(s.life)
		l := &listener{s: s, stop: stop, upCh: make(chan struct{}), waiters: map[string]chan struct{}{}, lastSeen: map[string]uint64{}}
		s.lis = l
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.run(life)
		}()
	}
	s.lis.mu.Lock()
	s.lis.active++
	s.lis.mu.Unlock()
	return s.lis
}

// stopListening closes the LISTEN connection once this store holds a lease
// and nobody waits through it, so a holder keeps one connection to the
// server, not two. The next Wait starts a new one.
func (s *Store) stopListening() {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lis
	if l == nil {
		return
	}
	l.mu.Lock()
	idle := l.active == 0
	l.mu.Unlock()
	if idle {
		l.stop() // its goroutine ends on its own; Close waits for it
		s.lis = nil
	}
}

// listener keeps one connection LISTENing on the table's channel and turns
// each notification (payload: the lease name) into a broadcast to that
// name's waiters.
type listener struct {
	s    *Store
	stop context.CancelFunc // ends run

	mu      sync.Mutex
	up      bool          // LISTEN is in effect
	upCh    chan struct{} // closed when up becomes true, or when an attempt failed; then replaced
	failed  bool          // the last attempt failed before it was up: do not make waiters wait for it
	waiters map[string]chan struct{}
	active  int // Wait calls in progress
	// seq counts notifications and LISTEN (re)starts; lastSeen[name] is seq
	// when the name's last Wait returned with LISTEN in effect.
	seq      uint64
	lastSeen map[string]uint64
}

// register returns the channel the next release of name closes.
func (l *listener) register(name string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := l.waiters[name]
	if ch == nil {
		ch = make(chan struct{})
		l.waiters[name] = ch
	}
	return ch
}

// unregister ends a Wait's use of the listener, remembering whether LISTEN
// was in effect and what it had seen.
func (l *listener) unregister(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active--
	if l.up {
		l.lastSeen[name] = l.seq
	} else {
		delete(l.lastSeen, name)
	}
}

// quietSince reports whether LISTEN has been in effect, with no
// notification, since name's previous Wait returned.
func (l *listener) quietSince(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen, ok := l.lastSeen[name]
	return l.up && ok && seen == l.seq
}

// await waits at most timeout (or ctx) until LISTEN is in effect, unless the
// last attempt failed.
func (l *listener) await(ctx context.Context, timeout time.Duration) {
	l.mu.Lock()
	if l.up || l.failed {
		l.mu.Unlock()
		return
	}
	upCh := l.upCh
	l.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-upCh:
	case <-t.C:
	case <-ctx.Done():
	}
}

// run connects, LISTENs, serves notifications until the connection fails,
// and starts over after a backoff, until life is cancelled.
func (l *listener) run(life context.Context) {
	backoff := 100 * time.Millisecond
	for life.Err() == nil {
		wasUp, err := l.serve(life)
		l.drop(wasUp)
		if life.Err() != nil {
			return
		}
		if wasUp {
			backoff = 100 * time.Millisecond
		}
		l.s.log.Debug("LISTEN connection dropped; waiters fall back to the expiry", "err", l.s.classify("listen", err))
		t := time.NewTimer(backoff + rand.N(backoff/2+1))
		select {
		case <-life.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxRelisten)
	}
}

// serve makes one LISTEN connection and reads it until it fails; it reports
// whether LISTEN was in effect before that.
func (l *listener) serve(life context.Context) (wasUp bool, err error) {
	cctx, cancel := context.WithTimeout(life, l.s.callTimeout)
	c, err := l.s.connect(cctx)
	if err == nil {
		_, err = c.Exec(cctx, "LISTEN "+pgx.Identifier{l.s.q.channel}.Sanitize())
	}
	cancel()
	if err != nil {
		if c != nil {
			closeNow(c)
		}
		return false, err
	}
	defer closeNow(c)
	l.markUp()
	for {
		wctx, cancel := context.WithTimeout(life, healthEvery)
		n, err := c.WaitForNotification(wctx)
		cancel()
		if life.Err() != nil {
			return true, life.Err()
		}
		if err != nil {
			if wctx.Err() == nil || c.IsClosed() {
				return true, err
			}
			// Silent for healthEvery: make sure the connection still works.
			pctx, cancel := context.WithTimeout(life, l.s.callTimeout)
			_, err = c.Exec(pctx, "SELECT 1")
			cancel()
			if err != nil {
				return true, err
			}
			continue
		}
		if n.Channel == l.s.q.channel {
			l.notify(n.Payload)
		}
	}
}

func (l *listener) markUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = false
	l.up = true
	l.seq++
	close(l.upCh)
	l.upCh = make(chan struct{})
}

// drop records a lost or failed connection. Waiters blocked in await are
// released at once; when it had been up, every registered waiter is woken to
// re-check, since a release may have gone unnoticed.
func (l *listener) drop(wasUp bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = false
	clear(l.lastSeen)
	if !wasUp {
		l.failed = true
		close(l.upCh)
		l.upCh = make(chan struct{})
		return
	}
	for name, ch := range l.waiters {
		close(ch)
		delete(l.waiters, name)
	}
}

func (l *listener) notify(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if ch := l.waiters[name]; ch != nil {
		close(ch)
		delete(l.waiters, name)
	}
}
