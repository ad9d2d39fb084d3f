package pglease

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
)

// Standbys (lease.CandidateRegistry). The waiting instances of every lease
// are rows of a second table beside the lease table, TABLE_standbys:
//
//	name text, id text, holder text, priority integer, since timestamptz,
//	expires timestamptz, PRIMARY KEY (name, id)
//
// created on first use like the lease table. A registration is live while
// expires, set from the server's clock, is ahead of it; a heartbeat (one
// statement: upsert, drop this name's lapsed rows that nobody else is
// touching, count the live ones) moves it on. A listing reads the live
// standbys and the holder in one statement. The registry uses the store's
// one query connection, and a waiting instance closes it again after each
// heartbeat, as it does for its sleep, so a standby holds no connection for
// the registry (and none at all between checks under wait=poll).

var _ lease.CandidateRegistry = (*Store)(nil)

const (
	// heartbeatsPerSecond is the budget of heartbeats of all the standbys
	// of one lease together; each is a connection, a login and a statement.
	heartbeatsPerSecond = 3
	// minHeartbeat is the shortest heartbeat interval: a registration
	// lapses 3 intervals after its standby died.
	minHeartbeat = 5 * time.Second
	// candidateStep is δ: a better standby wakes on the release's NOTIFY
	// (or, under wait=poll, at the same expiry as every other), connects,
	// lists and tries; δ leaves room for the connection and login.
	candidateStep = 250 * time.Millisecond
)

// CandidateTiming reports the heartbeat budget and δ.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	return lease.CandidateTiming{Heartbeat: true, PerSecond: heartbeatsPerSecond, MinInterval: minHeartbeat, Step: candidateStep, Relist: true}
}

// Join registers or refreshes c for expiry (server clock) and returns the
// number of live standbys of name, c included.
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	var live int64
	err := s.do(ctx, "join the standbys of "+name, false, func(ctx context.Context, conn *pgx.Conn) error {
		return s.withStandbys(ctx, conn, func() error {
			return conn.QueryRow(ctx, s.q.join, name, c.ID, c.Label, c.Priority, c.Since, storeopt.Millis(expiry)).Scan(&live)
		})
	})
	s.turns.Idle()
	if err != nil {
		return 0, err
	}
	if !s.places.Joined(name, c, int(live)) {
		s.dropListenerBehind()
	}
	return int(live), nil
}

// Leave removes the registration id of name.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	s.places.Left(name, id)
	err := s.do(ctx, "leave the standbys of "+name, false, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, s.q.leave, name, id)
		if isCode(err, "42P01") {
			return nil // never registered
		}
		return err
	})
	s.turns.Idle()
	return err
}

// Candidates returns the live standbys of name in takeover order and the
// holder (nil when the lease is free), read in one statement. It creates
// nothing (status may run as a role that may only read): before both tables
// exist it reads what there is.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	var (
		cs      []lease.Candidate
		holder  *lease.Holder
		missing bool
	)
	err := s.do(ctx, "list the standbys of "+name, false, func(ctx context.Context, conn *pgx.Conn) error {
		var err error
		missing = false
		cs, holder, err = listCandidates(ctx, conn, s.q.candidates, name)
		if isCode(err, "42P01") {
			missing = true
			if cs, holder, err = listCandidates(ctx, conn, s.q.candsOnly, name); isCode(err, "42P01") {
				err = nil
			}
		}
		return err
	})
	if err == nil && missing {
		holder, err = s.Status(ctx, name)
	}
	if err != nil {
		s.turns.Idle()
		return nil, nil, err
	}
	lease.SortCandidates(cs)
	if mine, front := s.places.Listed(name, cs, s.CandidateTiming()); mine && !front {
		s.dropListenerBehind()
	}
	// A standby lists when it joins and then sleeps until its turn: it
	// must not hold a connection meanwhile. One at the front that finds
	// the lease free tries next, at once or after its δ: the connection
	// stays for that attempt (another connect and login is what made
	// attempts under contention run out of time), and its Wait closes it
	// if the attempt loses.
	if holder != nil || !s.places.AtFront(name) {
		s.turns.Idle()
	}
	return cs, holder, nil
}

// listCandidates runs sql (q.candidates or q.candsOnly) for name and reads
// the standbys and the holder (nil: none) it lists.
func listCandidates(ctx context.Context, conn *pgx.Conn, sql, name string) ([]lease.Candidate, *lease.Holder, error) {
	rows, err := conn.Query(ctx, sql, name)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		cs     []lease.Candidate
		holder *lease.Holder
	)
	for rows.Next() {
		var (
			isHolder        bool
			id, label       string
			num, remMs, ttl int64
			since           time.Time
			heldUntil       *time.Time
		)
		if err := rows.Scan(&isHolder, &id, &label, &num, &since, &remMs, &ttl, &heldUntil); err != nil {
			return nil, nil, err
		}
		if isHolder {
			h := holderOf(name, label, num, since, ttl, remMs, heldUntil)
			holder = &h
			continue
		}
		cs = append(cs, lease.Candidate{ID: id, Label: label, Priority: int(num), Since: since, Remaining: time.Duration(remMs) * time.Millisecond})
	}
	return cs, holder, rows.Err()
}

// withStandbys runs fn, and when the standbys' table is missing creates it
// and runs fn once more.
func (s *Store) withStandbys(ctx context.Context, conn *pgx.Conn, fn func() error) error {
	err := fn()
	if !isCode(err, "42P01") {
		return err
	}
	if _, cerr := conn.Exec(ctx, s.q.createCands); cerr != nil && !isCode(cerr, "42P07") && !isCode(cerr, "23505") {
		if isCode(cerr, "42501") || isCode(cerr, "3F000") {
			return lease.NewError(fmt.Sprintf("%s: the standbys' table %s does not exist and role %q may not create it: create it once as a role that may (the statements are in docs/stores.md) and grant %q SELECT, INSERT, UPDATE, DELETE on it",
				s.cfg.where, s.q.cands, s.cfg.conn.User, s.cfg.conn.User), lease.ErrConfig)
		}
		return cerr
	}
	s.log.Debug("created the standbys' table", "table", s.q.cands)
	return fn()
}

// keepHeld is ReleaseHeld with a positive hold: the lease stays taken for
// hold from now, by the server's clock, and then becomes free by itself: the
// row stays without an acquisition ID (nobody can renew or release it) until
// it expires, which waiters see as the holder's remaining time. It wraps
// lease.ErrNotHeld when the row is no longer ours.
func (pl *pgLease) keepHeld(ctx context.Context, hold time.Duration) error {
	s := pl.s
	defer pl.held.Done()
	var n int64
	err := s.do(ctx, "release "+pl.info.Name, false, func(ctx context.Context, c *pgx.Conn) error {
		tag, err := c.Exec(ctx, s.q.releaseHeld, pl.info.Name, pl.info.ID, storeopt.Millis(hold))
		if isCode(err, "42P01") {
			return nil
		}
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer had our row of lease %s at release (it expired, was deleted, or another holder took the lease)", s.cfg.where, pl.info.Name), lease.ErrNotHeld)
	}
	return nil
}

// ReleaseHeld gives the lease up with a hold (lease.Holding): at once when
// hold is not positive, otherwise as keepHeld says.
func (pl *pgLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	return storeopt.ReleaseHeld(ctx, hold, pl.Release, pl.keepHeld)
}

var _ lease.Holding = (*pgLease)(nil)
