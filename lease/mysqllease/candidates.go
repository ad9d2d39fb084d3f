package mysqllease

import (
	"context"
	"database/sql"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
)

// Standbys (lease.CandidateRegistry). The waiting instances of every lease
// are rows of a second table beside the lease table, TABLE_standbys:
//
//	name varchar, id varchar, holder varbinary, priority int,
//	since datetime(6), expires datetime(6), PRIMARY KEY (name, id)
//
// created on first use like the lease table. A registration is live while
// expires, set from the server's clock, is ahead of it; a heartbeat (one
// round trip: drop this name's lapsed rows, upsert, count the live ones)
// moves it on. A listing reads the live standbys and the holder in one
// statement. The registry uses the store's one connection, and a standby
// behind the front of the line closes it again after each heartbeat and
// listing, so it holds no connection between its checks.

var _ lease.CandidateRegistry = (*Store)(nil)

const (
	// heartbeatsPerSecond is the budget of heartbeats of all the standbys
	// of one lease together; each may be a connection, a login and a
	// statement.
	heartbeatsPerSecond = 3
	// minHeartbeat is the shortest heartbeat interval: a registration
	// lapses 3 intervals after its standby died.
	minHeartbeat = 5 * time.Second
	// candidateStep is δ: a better standby notices the release at its next
	// read of the row (poll=, 250ms by default) and then connects, lists
	// and tries; δ covers a poll and the connection.
	candidateStep = 400 * time.Millisecond
)

// CandidateTiming reports the heartbeat budget and δ: δ is the poll
// interval plus 150ms, so a better standby that polls has its turn.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	step := max(candidateStep, s.cfg.poll+150*time.Millisecond)
	return lease.CandidateTiming{Heartbeat: true, PerSecond: heartbeatsPerSecond, MinInterval: minHeartbeat, Step: step, Relist: true}
}

// Join registers or refreshes c for expiry (server clock) and returns the
// number of live standbys of name, c included.
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	var live int64
	query, args := bind(s.q.join, map[string]any{
		"name": name, "id": c.ID, "holder": []byte(c.Label), "prio": int64(c.Priority), "since": c.Since.UTC(), "expus": storeopt.Millis(expiry) * 1000,
	})
	err := s.do(ctx, "join the standbys of "+name, []string{s.q.createCands}, func(ctx context.Context, conn *sql.Conn) error {
		rows, err := rowsOf(ctx, conn, query, args)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&live); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	s.idle()
	if err != nil {
		return 0, err
	}
	s.places.Joined(name, c, int(live))
	return int(live), nil
}

// Leave removes the registration id of name.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	s.places.Left(name, id)
	query, args := bind(s.q.leave, map[string]any{"name": name, "id": id})
	err := s.do(ctx, "leave the standbys of "+name, nil, func(ctx context.Context, conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, query, args...)
		if isNum(err, erNoSuchTable) {
			return nil // never registered
		}
		return err
	})
	s.idle()
	return err
}

// Candidates returns the live standbys of name in takeover order and the
// holder (nil when the lease is free), read in one statement. It creates
// nothing (status may run as a user that may only read): before both tables
// exist it reads what there is.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	var (
		cs      []lease.Candidate
		holder  *lease.Holder
		missing bool
	)
	both, bargs := bind(s.q.candidates, map[string]any{"name": name})
	only, oargs := bind(s.q.candsOnly, map[string]any{"name": name})
	err := s.do(ctx, "list the standbys of "+name, nil, func(ctx context.Context, conn *sql.Conn) error {
		var err error
		missing = false
		cs, holder, err = listCandidates(ctx, conn, name, both, bargs)
		if isNum(err, erNoSuchTable) {
			missing = true
			if cs, holder, err = listCandidates(ctx, conn, name, only, oargs); isNum(err, erNoSuchTable) {
				err = nil
			}
		}
		return err
	})
	if err == nil && missing {
		holder, err = s.Status(ctx, name)
	}
	if err != nil {
		s.idle()
		return nil, nil, err
	}
	lease.SortCandidates(cs)
	s.places.Listed(name, cs, s.CandidateTiming())
	// A standby lists when it joins and then sleeps until its turn: it
	// must not hold a connection meanwhile. One at the front that finds
	// the lease free tries next, at once or after its δ: the connection
	// stays for that attempt.
	if holder != nil || !s.places.AtFront(name) {
		s.idle()
	}
	return cs, holder, nil
}

// listCandidates runs query (q.candidates or q.candsOnly) and reads the
// standbys and the holder (nil: none) it lists.
func listCandidates(ctx context.Context, conn *sql.Conn, name, query string, args []any) ([]lease.Candidate, *lease.Holder, error) {
	rows, err := conn.QueryContext(ctx, query, args...)
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
			id              string
			label           []byte
			num, remUs, ttl int64
			since           time.Time
			heldUntil       sql.NullTime
		)
		if err := rows.Scan(&isHolder, &id, &label, &num, &since, &remUs, &ttl, &heldUntil); err != nil {
			return nil, nil, err
		}
		if isHolder {
			r := row{holder: label, token: num, since: since, ttlMs: ttl, remUs: remUs, isHold: heldUntil.Valid, heldUntil: heldUntil.Time}
			h := r.holderOf(name)
			holder = &h
			continue
		}
		cs = append(cs, lease.Candidate{ID: id, Label: string(label), Priority: int(num), Since: since, Remaining: time.Duration(remUs) * time.Microsecond})
	}
	return cs, holder, rows.Err()
}

// idle closes the connection when no lease of this store is held: a
// standby keeps no connection between its checks and heartbeats, unless
// it polls at the front of the line with the server's room (wait.go).
func (s *Store) idle() {
	if !s.room.keeping() {
		s.turns.Idle()
	}
}
