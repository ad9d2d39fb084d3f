package pglease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/room"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
)

// Waiting (docs/design.md, waiting for the lease). A waiter sleeps until the row's expiry as the server
// reports it (the remaining time is computed by the server, never from the
// client's clock), plus a little jitter, and wakes early when the holder's
// release statement NOTIFYs. The LISTEN connection is a hint only: it is
// made once per Store, kept across Wait calls by a goroutine the Store owns,
// and re-made with backoff when it drops; while it is down waiters simply
// sleep until the expiry.
//
// A fleet of standbys must never take the server's last connections, so a
// LISTEN connection is a privilege with two gates (docs/standbys.md):
//
//   - the line: only a standby among the first listenFront in takeover
//     order (those that try at once when the lease is freed) LISTENs; one
//     further back waits as under wait=poll, holding no connection, until
//     a listing places it at the front (candidates.go keeps the place);
//   - the server's room (the rule of package room): a new LISTEN
//     connection first reads how many connections are left
//     (max_connections less the reserved ones, the role's and the
//     database's connection limits) and LISTENs only while at least a
//     quarter of them (3 at least) stay free; it re-reads that after every
//     room.Every of silence and lets go when under half of that is left. A
//     server that refuses a connection as too many (SQLSTATE 53300), to
//     this connection or to the store's query connection, is back-pressure:
//     the LISTEN connection is closed at once and not tried again for a
//     jittered, growing pause (room.Pressure).

// listenFront is how many standbys at the front of the line LISTEN: the
// three that try at once when the lease is freed (lease's herd front).
const listenFront = 3

// errNoRoom is why a LISTEN connection was not kept: the server had too few
// free connections left for the application.
var errNoRoom = errors.New("too few free connections left on the server; waiting without LISTEN")

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
	if s.turns.Closed() {
		return s.classify("wait "+name, errClosed)
	}
	var wake <-chan struct{}
	// Under wait=poll there is no LISTEN to tell of a release: the expiry
	// the caller's TryAcquire reported stands, and the store's connection
	// is closed for the sleep, so a polling standby holds none. A standby
	// behind the front of the line waits the same way, and is woken when
	// a listing moves it to the front (lease's candidacy lists again while
	// it is behind).
	quiet := s.cfg.poll
	if !s.cfg.poll {
		if promote := s.places.Behind(name); promote != nil {
			s.stopListening()
			quiet, wake = true, promote
		} else if l := s.listen(name); l != nil {
			wake = l.Register(name)
			defer l.unregister(name)
			if l.Await(ctx, s.callTimeout) {
				// Up wakes the waiters registered while it was down: if it
				// came up just now, this Wait reads the state below anyway
				// (not Quiet), so the fresh channel misses nothing.
				wake = l.Register(name)
			}
			quiet = l.Quiet(name)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Between checks a waiter keeps only its LISTEN connection: the query
	// connection is closed for the sleep (a fleet of standbys must not hold
	// two connections each), and made again by the next attempt.
	if quiet && held != nil && held.By.Remaining > 0 {
		s.turns.Disconnect()
		return wakeup.Sleep(ctx, held.By.Remaining, wake)
	}
	var d time.Duration
	h, err := s.Status(ctx, name)
	switch {
	case err != nil:
		if d, err = wakeup.Unread(ctx, s.log, name, held, err); err != nil {
			return err
		}
	case h == nil:
		return nil // free now
	default:
		d = h.Remaining
	}
	s.turns.Disconnect()
	return wakeup.Sleep(ctx, d, wake)
}

// listen returns the store's listener, starting it on first use, with a
// Wait for name counted in; nil after Close. The caller unregisters when its
// Wait ends.
func (s *Store) listen(name string) *listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns.Closed() {
		return nil
	}
	if s.lis == nil {
		life, stop := context.WithCancel(s.turns.Life())
		l := &listener{s: s, stop: stop, names: map[string]int{}}
		l.Listener = wakeup.New(l, true)
		s.lis = l
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.Run(life)
		}()
	}
	s.lis.mu.Lock()
	s.lis.active++
	s.lis.names[name]++
	s.lis.mu.Unlock()
	return s.lis
}

// dropListenerBehind closes the LISTEN connection when every Wait using it
// is for a lease at whose line this store now stands behind the front
// (candidates.go calls it when a listing or a join placed it there): the
// Waits are woken, as by any drop, and wait again without LISTEN.
func (s *Store) dropListenerBehind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lis
	if l == nil {
		return
	}
	l.mu.Lock()
	names := make([]string, 0, len(l.names))
	for n := range l.names {
		names = append(names, n)
	}
	l.mu.Unlock()
	for _, n := range names {
		if s.places.Behind(n) == nil {
			return
		}
	}
	l.stop()
	s.lis = nil
}

// pressure is called when the server refused a connection as too many
// (SQLSTATE 53300): the LISTEN connection, if any, goes at once (it may be
// what takes the last slot another standby needs to take the lease), and
// the next one waits a back-pressure pause.
func (s *Store) pressure() {
	s.mu.Lock()
	l := s.lis
	s.mu.Unlock()
	if l != nil {
		l.squeeze()
	}
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

// listener is the transport of the store's wakeup.Listener: one connection
// LISTENing on the table's channel, whose notifications (payload: the lease
// name) wake that name's waiters. A lost connection wakes every waiter to
// re-check, since a release may have gone unnoticed.
type listener struct {
	*wakeup.Listener
	s    *Store
	stop context.CancelFunc // ends Run

	mu     sync.Mutex
	active int            // Wait calls in progress
	names  map[string]int // Wait calls in progress, by lease name
	// squeezed is set by squeeze: the server refused a connection as too
	// many; cancelServe ends the connection being served.
	squeezed    bool
	cancelServe context.CancelFunc
	// pressure is the current back-pressure pause; only Run's goroutine
	// (in Retry) uses it.
	pressure room.Pressure
}

// unregister ends a Wait's use of the listener, remembering whether LISTEN
// was in effect and what it had seen.
func (l *listener) unregister(name string) {
	l.mu.Lock()
	l.active--
	if l.names[name]--; l.names[name] <= 0 {
		delete(l.names, name)
	}
	l.mu.Unlock()
	l.Remember(name)
}

// Retry chooses the pause before the next LISTEN connection. When the server
// had no room (errNoRoom, or a refusal as too many connections) it is a
// back-pressure one (room.Pressure); otherwise the usual backoff.
func (l *listener) Retry(err error, b *wakeup.Backoff) (time.Duration, bool) {
	if l.takeSqueezed() || errors.Is(err, errNoRoom) || isCode(err, "53300") {
		pause := l.pressure.Next()
		l.s.log.Debug("the server is short of connections; waiting without LISTEN for a while", "err", l.s.classify("listen", err), "retry_in", pause)
		return pause, true
	}
	l.pressure.Reset()
	l.s.log.Debug("LISTEN connection dropped; waiters fall back to the expiry", "err", l.s.classify("listen", err))
	return b.Next(), true
}

// squeeze ends the connection being served and makes the next attempt wait
// a back-pressure pause.
func (l *listener) squeeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.squeezed = true
	if l.cancelServe != nil {
		l.cancelServe()
	}
}

func (l *listener) takeSqueezed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	sq := l.squeezed
	l.squeezed = false
	return sq
}

// Serve makes one LISTEN connection, if the server has room for it, and
// reads it until it fails or the room runs short.
func (l *listener) Serve(life context.Context, wl *wakeup.Listener) error {
	sctx, cancelServe := context.WithCancel(life)
	defer cancelServe()
	l.mu.Lock()
	if l.squeezed {
		l.mu.Unlock()
		return errNoRoom
	}
	l.cancelServe = cancelServe
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.cancelServe = nil
		l.mu.Unlock()
	}()
	c, err := l.connect(sctx)
	if err != nil {
		return err
	}
	defer closeNow(c)
	wl.Up()
	return l.read(sctx, c, wl)
}

// connect makes the LISTEN connection. It asks first on the query
// connection whether the server has room, so that a server without room
// does not even see the LISTEN connection; then again on the new one, since
// others may have connected in between. (It asks on the query connection
// only when that is open, as it is when a Wait starts: a connection made for
// the question would cost what it saves; closed again unless a call waits
// for it.)
func (l *listener) connect(sctx context.Context) (*pgx.Conn, error) {
	var noRoom error
	err := l.s.doIfConnected(sctx, "read the free connections", func(ctx context.Context, c *pgx.Conn) error {
		err := l.s.room(ctx, c, 1)
		if errors.Is(err, errNoRoom) {
			noRoom, err = err, nil
		}
		return err
	})
	l.s.turns.Idle()
	if err == nil {
		err = noRoom
	}
	if err != nil {
		return nil, err
	}
	// The login gets a set-up's bound, the statements a call's: under load
	// a login outlasts a call, and a standby loses nothing by waiting.
	setupCtx, cancelSetup := context.WithTimeout(sctx, lease.SetupTimeout)
	c, err := l.s.connect(setupCtx)
	cancelSetup()
	cctx, cancel := context.WithTimeout(sctx, l.s.callTimeout)
	defer cancel()
	if err == nil {
		err = l.s.room(cctx, c, 0)
	}
	if err == nil {
		_, err = c.Exec(cctx, "LISTEN "+pgx.Identifier{l.s.q.channel}.Sanitize())
	}
	if err != nil {
		if c != nil {
			closeNow(c)
		}
		return nil, err
	}
	return c, nil
}

// read passes c's notifications on to wl until c fails, sctx ends, or the
// server's room runs short (checked after every room.Every of silence,
// which also pings c: an unanswered read means a dead connection, which is
// re-made, waking every waiter to re-check).
func (l *listener) read(sctx context.Context, c *pgx.Conn, wl *wakeup.Listener) error {
	for {
		wctx, cancel := context.WithTimeout(sctx, room.Every)
		n, err := c.WaitForNotification(wctx)
		cancel()
		if sctx.Err() != nil {
			return sctx.Err()
		}
		if err != nil {
			if wctx.Err() == nil || c.IsClosed() {
				return err
			}
			// Silent for room.Every: is there still room (and does the
			// connection still work)?
			pctx, cancel := context.WithTimeout(sctx, l.s.callTimeout)
			err = l.s.room(pctx, c, -1)
			cancel()
			if err != nil {
				return err
			}
			continue
		}
		if n.Channel == l.s.q.channel {
			wl.Notify(n.Payload)
		}
	}
}

// roomSQL reads, on the server, the connections a non-reserved client may
// still make and how many client sessions there are, for the server as a
// whole, for this role and for this database (a limit of -1: none).
// pg_stat_activity lists every session to every role (the columns a role
// may not see are NULL, not the rows).
const roomSQL = `SELECT
	current_setting('max_connections')::int
		- current_setting('superuser_reserved_connections')::int
		- coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0),
	(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int,
	coalesce((SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user), -1),
	(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND usename = current_user)::int,
	coalesce((SELECT datconnlimit FROM pg_database WHERE datname = current_database()), -1),
	(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname = current_database())::int`

// room reports errNoRoom when a LISTEN connection would leave fewer than a
// quarter (at least 3) of the connections of the server, the role or the
// database free (room.Check; a limit of -1 is none). extra says what c is:
// 1, a query connection, and the LISTEN one is still to be made; 0, the new
// LISTEN connection (counted among the sessions); -1, a LISTEN connection
// in use, which is kept down to half of that. A server that will not tell
// (a pooler, a catalog the role may not read) is taken to have room: the
// 53300 of a full server still makes the listener let go.
func (s *Store) room(ctx context.Context, c *pgx.Conn, extra int) error {
	var maxConn, used, roleLimit, roleUsed, dbLimit, dbUsed int
	err := c.QueryRow(ctx, roomSQL).Scan(&maxConn, &used, &roleLimit, &roleUsed, &dbLimit, &dbUsed)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && kindOf(err) != lease.ErrUnavailable {
			s.log.Debug("cannot read the server's free connections; LISTENing anyway", "err", s.classify("read the free connections", err))
			return nil
		}
		return err
	}
	return room.Check(errNoRoom, int64(max(extra, 0)), extra < 0,
		room.Limit{Max: int64(maxConn), Used: int64(used)},
		room.Limit{Max: int64(roleLimit), Used: int64(roleUsed)},
		room.Limit{Max: int64(dbLimit), Used: int64(dbUsed)})
}
