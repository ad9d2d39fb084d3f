package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/room"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
)

// Waiting (docs/design.md, waiting for the lease). MySQL has no
// notification a waiter could sleep on, so a waiter reads the lease row:
// every poll (poll=, DefaultPoll) while it is at the front of the line,
// never later than the row's expiry as the server reported it (computed by
// the server, never from the client's clock), with ±25% jitter so that the
// front does not read in step. A release is seen at the next read.
//
// A fleet of standbys must never take the server's last connections, and
// must cost the server a bounded rate of statements (docs/standbys.md):
//
//   - the line: only a standby among the first pollFront in takeover order
//     (those that try at once when the lease is freed) polls; one further
//     back holds no connection and sleeps until the expiry, or until a
//     listing places it at the front (lease's candidacy lists again while
//     it is behind). A lease's standbys together so read it at most
//     pollFront times per poll interval, however many they are;
//   - the server's room (the rule of package room): a polling standby
//     keeps its connection between reads only while at least a quarter of
//     the connections (3 at least) of the server (max_connections) and of
//     its user (max_user_connections) stay free, re-read every room.Every;
//     it lets go when under half of that is left. Without room it polls
//     every noRoomPoll on a connection made for each read and closed after
//     it;
//   - back-pressure: a server that refuses a connection as too many
//     (errors 1040, 1203, 1226) makes every Wait of this store keep no
//     connection and poll every noRoomPoll for a jittered, growing pause
//     (room.Pressure).

const (
	// pollFront is how many standbys at the front of the line poll: the
	// three that try at once when the lease is freed (lease's herd front).
	pollFront = 3
	// noRoomPoll is the poll interval without room: each read then costs
	// a connection and a login.
	noRoomPoll = 2 * time.Second
)

// errNoRoom is why a waiter does not keep its connection: the server or
// the user had too few free connections left.
var errNoRoom = errors.New("too few free connections left on the server")

// Wait blocks until the lease may have become free: a read of the row
// found it free, the row's expiry passed, or (when the row could not be
// read) a short interval passed. It returns nil to mean "try again", or
// ctx's error.
func (s *Store) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.turns.Closed() {
		return s.classify("wait "+name, errClosed)
	}
	remaining, since := time.Duration(-1), time.Now()
	if held != nil && held.By.Remaining > 0 {
		remaining = held.By.Remaining
	}
	if promote := s.places.Behind(name); promote != nil {
		return s.waitBehind(ctx, name, held, remaining, promote)
	}
	s.room.enter()
	defer s.room.leave()
	every := s.pollEvery(ctx) // on the connection of the caller's attempt, when still open
	for {
		if promote := s.places.Behind(name); promote != nil {
			// A listing placed this standby behind the front meanwhile.
			left := time.Duration(-1)
			if remaining >= 0 {
				left = max(remaining-time.Since(since), time.Millisecond)
			}
			return s.waitBehind(ctx, name, held, left, promote)
		}
		d := every*3/4 + rand.N(every/2+1)
		if remaining >= 0 {
			d = min(d, max(remaining-time.Since(since), 0)+wakeup.Jitter(remaining))
		}
		if !s.room.keeping() && !s.turns.Held() {
			s.turns.Disconnect()
		}
		if err := wakeup.Sleep(ctx, d, nil); err != nil {
			return err
		}
		if remaining >= 0 && time.Since(since) >= remaining {
			return nil
		}
		h, err := s.Status(ctx, name)
		switch {
		case err != nil:
			w, err := wakeup.Unread(ctx, s.log, name, held, err)
			if err != nil {
				return err
			}
			s.turns.Disconnect()
			return wakeup.Sleep(ctx, w, nil)
		case h == nil || h.Remaining <= 0:
			return nil
		}
		remaining, since = h.Remaining, time.Now()
		every = s.pollEvery(ctx) // on the connection the read just used
	}
}

// waitBehind is Wait behind the front of the line: no connection, no
// reads; the expiry (remaining, when known, else read once), or a listing
// that moves this standby to the front (promote), wakes it.
func (s *Store) waitBehind(ctx context.Context, name string, held *lease.HeldError, remaining time.Duration, promote <-chan struct{}) error {
	if remaining < 0 {
		h, err := s.Status(ctx, name)
		switch {
		case err != nil:
			if remaining, err = wakeup.Unread(ctx, s.log, name, held, err); err != nil {
				return err
			}
		case h == nil:
			s.turns.Disconnect()
			return nil
		default:
			remaining = h.Remaining
		}
	}
	s.turns.Disconnect()
	return wakeup.Sleep(ctx, remaining, promote)
}

// pollEvery decides, from the server's room (read when due, on the
// store's connection when it is open), whether a polling Wait keeps its
// connection, and returns the poll interval that goes with it.
func (s *Store) pollEvery(ctx context.Context) time.Duration {
	if !s.room.due() {
		return s.room.interval(s.cfg.poll)
	}
	var roomErr error
	read := false
	err := s.doIfConnected(ctx, "read the free connections", func(ctx context.Context, c *sql.Conn) error {
		read = true
		roomErr = s.readRoom(ctx, c, s.room.keeping())
		if errors.Is(roomErr, errNoRoom) {
			return nil
		}
		return roomErr
	})
	switch {
	case err != nil:
		s.log.Debug("cannot read the server's free connections; polling without keeping a connection", "err", err)
		s.room.set(false)
	case read:
		if roomErr != nil {
			s.log.Debug("polling without keeping a connection", "why", roomErr)
		}
		s.room.set(roomErr == nil)
	}
	return s.room.interval(s.cfg.poll)
}

// roomSQL reads the connection limits of the server and of this user (the
// session value of max_user_connections is the account's own limit when
// it has one; 0: none), the connections of this user (information_schema
// lists a user's own sessions without any privilege) and the server's.
const roomSQL = `SELECT @@GLOBAL.max_connections, @@SESSION.max_user_connections,
	(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1));
SHOW GLOBAL STATUS LIKE 'Threads_connected'`

// readRoom returns errNoRoom when this connection, kept, leaves fewer than
// a quarter (at least 3) of the connections of the server or the user
// free (room.Check; a limit of 0 is none); staying: it is kept already,
// and may stay down to half of that. A server that will not tell is taken
// to have room: error 1040 still makes waiters let go.
func (s *Store) readRoom(ctx context.Context, c *sql.Conn, staying bool) error {
	rows, err := c.QueryContext(ctx, roomSQL)
	if err != nil {
		if serverError(err) {
			return nil
		}
		return err
	}
	defer rows.Close()
	var maxConn, userLimit, userUsed, used int64
	if !rows.Next() {
		return rows.Err()
	}
	if err := rows.Scan(&maxConn, &userLimit, &userUsed); err != nil {
		return err
	}
	for rows.Next() {
	}
	if rows.NextResultSet() && rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			return err
		}
		used, _ = strconv.ParseInt(v, 10, 64)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return room.Check(errNoRoom, 0, staying, limit(maxConn, used), limit(userLimit, userUsed))
}

// limit is a MySQL connection limit for room.Check: 0 (or less) is none.
func limit(n, used int64) room.Limit {
	if n <= 0 {
		return room.Limit{Max: -1, Used: used}
	}
	return room.Limit{Max: n, Used: used}
}

// roomState is whether polling Waits keep the store's connection between
// their reads.
type roomState struct {
	mu            sync.Mutex
	polling       int       // Waits polling now
	keep          bool      // the last read of the room found enough
	checked       time.Time // when the room was last read
	pressure      room.Pressure
	pressureUntil time.Time
}

func (r *roomState) enter() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.polling++
}

func (r *roomState) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.polling--
}

// keeping reports whether a polling Wait keeps the connection now.
func (r *roomState) keeping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.polling > 0 && r.keep && time.Now().After(r.pressureUntil)
}

// interval is the poll interval: poll while the connection is kept, or
// before the room was first read (the first read's connection reads it);
// noRoomPoll (or poll, if longer) without room and during a back-pressure
// pause.
func (r *roomState) interval(poll time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Now().After(r.pressureUntil) && (r.keep || r.checked.IsZero()) {
		return poll
	}
	return max(poll, noRoomPoll)
}

// due reports whether the room should be read (again) now: never during a
// back-pressure pause.
func (r *roomState) due() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	return now.After(r.pressureUntil) && (r.checked.IsZero() || now.Sub(r.checked) >= room.Every || !r.keep && now.Sub(r.checked) >= noRoomPoll)
}

func (r *roomState) set(keep bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keep, r.checked = keep, time.Now()
	if keep {
		r.pressure.Reset()
	}
}

// squeeze records a refusal as too many connections: no connection is kept
// for a jittered, growing pause.
func (r *roomState) squeeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keep = false
	r.pressureUntil = time.Now().Add(r.pressure.Next())
}
