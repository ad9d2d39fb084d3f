// Package mysqllease keeps leaderrun's leases in a MySQL or MariaDB table,
// through github.com/go-sql-driver/mysql: a holder keeps one connection for
// its calls; a waiting instance at the front of the line keeps one to read
// the lease row every poll while the server has room for it (none further
// back: see wait.go). There is no GET_LOCK: a lock that dies with a TCP
// connection gives no fencing token and no TTL.
//
// # Data
//
// One table (default leaderrun_leases, or ?table=NAME) in the URL's
// database, with one row per held lease and one counter row per lease name
// (NAME~, see counterName):
//
//	name varchar PRIMARY KEY, holder varbinary, id varchar, token bigint,
//	since datetime(6), ttl_ms bigint, expires datetime(6)
//
// It is created on first use (CREATE TABLE IF NOT EXISTS, only when a
// statement finds it missing, so start-up costs nothing); a user that may
// not create it gets an error wrapping lease.ErrConfig that names the
// privilege. Every change is one round trip:
//
//   - acquire (one round trip, one transaction): INSERT … ON DUPLICATE
//     KEY UPDATE of the counter row, then of the lease row, each of whose
//     columns is assigned only where the row has expired (or already
//     carries our acquisition ID: a retry of an attempt whose answer was
//     lost); a SELECT of the row after the commit says whether it is ours
//     and, when not, who holds it;
//   - renew: UPDATE the expiry WHERE the ID matches and the row has not
//     expired (never re-creating a vanished row);
//   - release: DELETE WHERE the ID matches and the row has not expired;
//   - release with a hold (lease.Holding): UPDATE WHERE the ID matches,
//     clearing the ID and setting the expiry to the hold's end.
//
// Every connection reads READ COMMITTED (set explicitly: MySQL's and
// MariaDB's default, REPEATABLE READ, takes gap locks an upsert does not
// need), waits at most the call timeout for a row lock
// (innodb_lock_wait_timeout) and, on MariaDB, runs a statement at most that
// long (max_statement_time).
//
// # Time
//
// Expiry is computed and checked by the server alone: expires =
// UTC_TIMESTAMP(6) + ttl, the server's clock when the statement started,
// which is no earlier than when the client sent it, so a holder that counts
// its deadline from its own send time never overestimates; "expired" means
// expires <= UTC_TIMESTAMP(6). No client clock is read for a safety
// decision. Every call is bounded by Options.CallTimeout and the caller's
// context (the driver closes the socket at the deadline).
//
// # Fencing tokens
//
// The counter row of a name is locked first by every acquisition of the
// name or of one of its slots, and set to greatest(counter + 1, the
// server's clock in microseconds); the lease row takes that value. So two
// acquisitions of one name commit their tokens in order; tokens strictly
// increase per name and across its slots; they stay above every earlier
// token when the rows are deleted by hand or lost (a restored backup, a
// failover to a replica that missed the last writes) as long as the
// server's clock does not step back; and they stay below 2^53.
//
// # What is not guaranteed
//
// The lease is as safe as the primary that stores it: replication is
// asynchronous unless semi-synchronous or Galera says otherwise, so a
// failover can lose a just-written row (two holders); the fencing token
// still does not go back. A clock step on the server moves every expiry.
// Waiters learn of a release by reading the row (there is no notification
// to sleep on), so a clean handover takes up to one poll interval.
package mysqllease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/line"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	"github.com/leaderrun/leaderrun/lease/internal/turns"
)

// DefaultCallTimeout bounds one store call when Options.CallTimeout is zero.
const DefaultCallTimeout = 2 * time.Second

// MinTTL is the shortest lease accepted: below it, round trips and the margin
// ε are a large part of the lease.
const MinTTL = 100 * time.Millisecond

// epsilon is the store's margin ε: expiry is kept and compared in
// microseconds on the server's own clock; the rest is headroom.
const epsilon = 5 * time.Millisecond

// maxToken bounds fencing tokens: from 2^53 on, JSON readers lose integers.
const maxToken = 1<<53 - 1

// Options tunes a Store; the zero value is usable. CallTimeout bounds every
// call (connect included) and the server's lock waits. Getenv reads
// MYSQL_PWD (EnvPassword) when neither the URL nor option-file= gives a
// password. Log receives debug messages.
type Options = lease.OpenOptions

// Store is a lease.Store on MySQL or MariaDB. It is safe for concurrent use
// (calls take turns on one connection); Close it when done.
type Store struct {
	cfg         *config
	callTimeout time.Duration
	log         *slog.Logger
	q           queries
	db          *sql.DB
	setup       string // run on every new connection

	turns *turns.Conn[*sql.Conn] // the connection, which calls take turns on

	places *line.Places // where this store's standbys stand (candidates.go)
	room   roomState    // whether a waiter may keep its connection (wait.go)
}

var _ lease.Store = (*Store)(nil)

// Open prepares the store named by raw (see docs/stores.md for the URL forms)
// and connects once to check the address and credentials. Errors wrap
// lease.ErrConfig (bad URL, refused login, missing database); none contains
// the password. A server that cannot be reached yet is not an error here:
// the store is returned and its calls report ErrUnavailable until the server
// answers, so a waiting instance keeps trying instead of exiting.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	o.CallTimeout, o.Getenv, o.Log = storeopt.Defaults(o.CallTimeout, DefaultCallTimeout, o.Getenv, o.Log)
	c, err := parseURL(raw, o.Getenv)
	if err != nil {
		return nil, err
	}
	log := o.Log.With("store", c.display)
	dc := c.driver
	dc.Loc = time.UTC
	dc.ParseTime = true
	// One round trip per call: parameters are interpolated by the driver
	// (never a server-side prepare), which lets a call send two or three
	// statements at once.
	dc.InterpolateParams = true
	dc.MultiStatements = true
	dc.ClientFoundRows = true // a renewal in the same microsecond still counts
	dc.Timeout = o.CallTimeout
	dc.Logger = driverLog{log: log, secrets: c.secrets}
	conn, err := mysql.NewConnector(dc)
	if err != nil {
		return nil, badURL("%s", storeerr.Quote(err.Error(), c.secrets, 3))
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(0) // a connection given back is closed: the store keeps its own
	secs := max(1, int((o.CallTimeout+time.Second-1)/time.Second))
	s := &Store{
		cfg:         c,
		callTimeout: o.CallTimeout,
		log:         log,
		q:           newQueries(c.table),
		db:          db,
		setup: "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;\n" +
			"SET SESSION innodb_lock_wait_timeout = " + strconv.Itoa(secs) +
			" /*M!100108 , max_statement_time = " + strconv.FormatFloat(o.CallTimeout.Seconds(), 'f', 3, 64) + " */",
		turns:  turns.New(dropConn),
		places: line.New(pollFront),
	}
	err = s.do(ctx, "connect", nil, func(context.Context, *sql.Conn) error { return nil })
	if err != nil {
		if errors.Is(err, lease.ErrUnavailable) && ctx.Err() == nil {
			s.log.Debug("mysql not reachable yet", "err", err)
			return s, nil
		}
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// driverLog passes the driver's own log lines (a connection that broke)
// to the debug log, never to stderr.
type driverLog struct {
	log     *slog.Logger
	secrets []string
}

func (d driverLog) Print(v ...any) {
	d.log.Debug("mysql driver", "msg", storeerr.Quote(fmt.Sprint(v...), d.secrets, 3))
}

// String returns the store URL without the password.
func (s *Store) String() string { return s.cfg.display }

// Table returns the lease table's name.
func (s *Store) Table() string { return s.cfg.table }

func (s *Store) classify(op string, err error) error {
	return classify(s.cfg.where, op, err, s.cfg.secrets)
}

// do runs fn on the store's connection (connecting first when needed),
// bounded by ctx and the call timeout, and classifies its error. When fn
// finds a table missing (error 1146) and create is not empty, create's
// statements run and fn runs once more. A connection that failed in a way
// that may have left it unusable is closed, so the next call connects
// afresh.
func (s *Store) do(ctx context.Context, op string, create []string, fn func(context.Context, *sql.Conn) error) error {
	return s.call(ctx, op, create, false, fn)
}

// doIfConnected is do on the store's connection when it is open; when it
// is not, it does nothing and returns nil.
func (s *Store) doIfConnected(ctx context.Context, op string, fn func(context.Context, *sql.Conn) error) error {
	return s.call(ctx, op, nil, true, fn)
}

func (s *Store) call(ctx context.Context, op string, create []string, ifConnected bool, fn func(context.Context, *sql.Conn) error) error {
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	if err := s.turns.Take(cctx); err != nil {
		return s.classify(op+" (waiting for this store's previous call)", err)
	}
	defer s.turns.Give()
	if s.turns.Closed() {
		return s.classify(op, errClosed)
	}
	if s.turns.Get() == nil {
		if ifConnected {
			return nil
		}
		if err := s.open(cctx); err != nil {
			if isNum(err, erTooManyConns) || isNum(err, erTooManyUserConns) || isNum(err, erUserLimitReached) {
				s.room.squeeze() // back-pressure: a waiter keeps no connection for a while
			}
			return s.classify(op, err)
		}
	}
	err := fn(cctx, s.turns.Get())
	if len(create) > 0 && isNum(err, erNoSuchTable) {
		if err = s.createTables(cctx, create); err == nil {
			err = fn(cctx, s.turns.Get())
		}
	}
	if err != nil {
		if !serverError(err) {
			s.turns.Drop()
		}
		if le := (*lease.Error)(nil); errors.As(err, &le) {
			return err // already ours
		}
		return s.classify(op, err)
	}
	return nil
}

// open makes the store's connection and sets its session up, for a call
// that has the turn.
func (s *Store) open(ctx context.Context) error {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, s.setup); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.Close()
		return err
	}
	s.turns.Set(c)
	return nil
}

// dropConn closes c for good (not back to a pool).
func dropConn(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn }) // never reused
	_ = c.Close()
}

// createTables runs the CREATE TABLE statements. Concurrent creators race
// harmlessly (IF NOT EXISTS); a user without the right gets an ErrConfig
// that says what to do.
func (s *Store) createTables(ctx context.Context, stmts []string) error {
	for _, stmt := range stmts {
		_, err := s.turns.Get().ExecContext(ctx, stmt)
		if err == nil {
			continue
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == erTableAccess || me.Number == erDBAccessDenied || me.Number == erSpecificAccess) {
			return lease.NewError(fmt.Sprintf("%s: the tables %s, %s and %s do not all exist and user %q may not create them (%s, error %d): "+
				"create them once as a user that may (the statements are in docs/stores.md, section MySQL and MariaDB) and grant %q SELECT, INSERT, UPDATE, DELETE on them",
				s.cfg.where, s.q.table, s.q.cands, s.q.runs, s.cfg.driver.User, storeerr.Redact(storeerr.FirstLine(me.Message)), me.Number, s.cfg.driver.User), lease.ErrConfig)
		}
		return err
	}
	s.log.Debug("created the lease tables", "table", s.q.table)
	return nil
}

// dropping is an error after which the connection must not be used
// again (call closes it, whatever the error was).
type dropping struct{ error }

func (d dropping) Unwrap() error { return d.error }

// rowsOf runs a query of one or more statements and returns its rows at
// the first result set that has columns (the SELECT after an INSERT).
func rowsOf(ctx context.Context, c *sql.Conn, query string, args []any) (*sql.Rows, error) {
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	for {
		if cols, err := rows.Columns(); err == nil && len(cols) > 0 {
			return rows, nil
		}
		if !rows.NextResultSet() {
			err := rows.Err()
			rows.Close()
			if err == nil {
				err = errors.New("no result set")
			}
			return nil, err
		}
	}
}

// row is a lease row as the acquire and status statements read it.
type row struct {
	ours      bool
	holder    []byte
	token     int64
	since     time.Time
	ttlMs     int64
	remUs     int64
	isHold    bool
	heldUntil time.Time
}

func (r *row) holderOf(name string) lease.Holder {
	h := lease.Holder{Name: name, Label: string(r.holder), Since: r.since}
	if r.token > 0 && r.token <= maxToken {
		h.Token = uint64(r.token)
	}
	if r.ttlMs > 0 {
		h.TTL = time.Duration(r.ttlMs) * time.Millisecond
	}
	if r.remUs > 0 {
		h.Remaining = time.Duration(r.remUs) * time.Microsecond
	}
	if r.isHold {
		h.HeldUntil = r.heldUntil
	}
	return h
}

// TryAcquire makes one attempt, in one statement (and a read of the row in
// the same round trip). A *lease.HeldError carries the current holder,
// token, since and remaining time. Retrying with the same req.ID after a
// lost answer succeeds while the lease is still ours (same token, expiry
// restarted). req.TTL below MinTTL wraps lease.ErrConfig.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := storeopt.CheckRequest(req.ID, req.TTL, "MySQL", MinTTL); err != nil {
		return nil, err
	}
	ttl := storeopt.Millis(req.TTL)
	base, _, _ := lease.ParseSlotName(req.Name)
	query, args := bind(s.q.acquire, map[string]any{
		"ctr": counterName(base), "name": req.Name, "holder": []byte(req.Label), "id": req.ID, "ttl": ttl, "ttlus": ttl * 1000,
	})
	var (
		r     row
		found bool
	)
	err := s.do(ctx, "acquire "+req.Name, []string{s.q.createTable}, func(ctx context.Context, c *sql.Conn) error {
		found = false
		rows, err := rowsOf(ctx, c, query, args)
		if err != nil {
			// A statement of the batch failed, maybe inside its
			// transaction: the connection goes (which rolls back).
			return dropping{err}
		}
		defer rows.Close()
		if rows.Next() {
			if err := rows.Scan(&r.ours, &r.holder, &r.token, &r.since, &r.ttlMs, &r.remUs, &r.isHold, &r.heldUntil); err != nil {
				return err
			}
			found = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if !found {
		// Deleted by hand between the two statements, or expired: nobody
		// holds it now, but this attempt did not take it.
		return nil, &lease.HeldError{By: lease.Holder{Name: req.Name}}
	}
	if !r.ours {
		return nil, &lease.HeldError{By: r.holderOf(req.Name)}
	}
	if err := s.checkToken(ctx, req, ttl, r); err != nil {
		return nil, err
	}
	return &myLease{s: s, ttl: ttl, held: s.turns.Hold(), info: lease.Holder{
		Name: req.Name, Label: req.Label, ID: req.ID, Token: uint64(r.token),
		Since: r.since, TTL: time.Duration(ttl) * time.Millisecond, Granted: r.since.UTC(),
	}}, nil
}

// checkToken refuses an acquisition r whose token cannot be used: past
// 2^53, or ahead of the server's clock when it took the row by more than
// lease.MaxClockSkew. The row was committed with it: it is taken out again
// at once (best effort), so the lease is not blocked for the TTL by an
// acquisition that never ran anything.
func (s *Store) checkToken(ctx context.Context, req lease.Request, ttl int64, r row) error {
	base, _, _ := lease.ParseSlotName(req.Name)
	var bad error
	switch {
	case r.token <= 0 || r.token > maxToken:
		bad = lease.NewError(fmt.Sprintf("%s: acquire %s: bad fencing token %d (the counter row %s was set past 2^53?)", s.cfg.where, req.Name, r.token, counterName(base)))
	case lease.TokenAhead(uint64(r.token), r.since): // since: the server's clock when it took the row
		bad = lease.TokenAheadError(req.Name, uint64(r.token), r.since,
			fmt.Sprintf("the counter row %q of %s at %s", counterName(base), s.q.table, s.cfg.where))
	default:
		return nil
	}
	l := &myLease{s: s, ttl: ttl, info: lease.Holder{Name: req.Name, ID: req.ID}} // held nil: never counted as held
	_ = l.Release(context.WithoutCancel(ctx))
	return bad
}

// Status returns the current holder (ID left out) with its remaining time as
// the server computes it, or nil when the lease is free (no row, an expired
// row, or no table yet).
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	var h *lease.Holder
	query, args := bind(s.q.status, map[string]any{"name": name})
	err := s.do(ctx, "status "+name, nil, func(ctx context.Context, c *sql.Conn) error {
		h = nil
		rows, err := c.QueryContext(ctx, query, args...)
		if isNum(err, erNoSuchTable) {
			return nil
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		if rows.Next() {
			var r row
			if err := rows.Scan(&r.holder, &r.token, &r.since, &r.ttlMs, &r.remUs, &r.isHold, &r.heldUntil); err != nil {
				return err
			}
			v := r.holderOf(name)
			h = &v
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Limits: MySQL leases expire; the TTL is kept in whole milliseconds.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{Expires: true, Epsilon: epsilon, MinTTL: MinTTL, TTLUnit: time.Millisecond}
}

// Close closes the store's connection. Leases from this store must not be
// used afterwards. Close is idempotent.
func (s *Store) Close() error {
	if !s.turns.Shut() {
		return nil
	}
	s.turns.CloseConn(func(c *sql.Conn) { _ = c.Close() })
	return s.db.Close()
}

// myLease is one acquisition.
type myLease struct {
	s    *Store
	ttl  int64
	info lease.Holder
	held *turns.Lease // counted out when released (or released with a hold)
}

func (l *myLease) Info() lease.Holder { return l.info }

// exec runs one statement of the lease and returns the rows it matched.
func (l *myLease) exec(ctx context.Context, op, query string, args map[string]any) (int64, error) {
	var n int64
	q, a := bind(query, args)
	err := l.s.do(ctx, op+" "+l.info.Name, nil, func(ctx context.Context, c *sql.Conn) error {
		n = 0
		res, err := c.ExecContext(ctx, q, a...)
		if isNum(err, erNoSuchTable) {
			return nil
		}
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// Renew moves the expiry to the server's clock + TTL if the row still
// carries our ID and has not expired. It wraps lease.ErrLost when it does
// not; any other error means "unknown outcome".
func (l *myLease) Renew(ctx context.Context) error {
	n, err := l.exec(ctx, "renew", l.s.q.renew, map[string]any{"name": l.info.Name, "id": l.info.ID, "ttlus": l.ttl * 1000})
	if err != nil {
		return err
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer has our row of lease %s (it expired, was deleted, or another holder took the lease)", l.s.cfg.where, l.info.Name), lease.ErrLost)
	}
	return nil
}

// Release deletes the row if it still carries our ID and has not expired.
// It wraps lease.ErrNotHeld when the row is gone, another holder's, or had
// already expired (an expired row of ours stays, free, until the next
// acquisition overwrites it).
func (l *myLease) Release(ctx context.Context) error {
	defer l.held.Done()
	n, err := l.exec(ctx, "release", l.s.q.release, map[string]any{"name": l.info.Name, "id": l.info.ID})
	if err != nil {
		return err
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer had our row of lease %s at release (it expired, was deleted, or another holder took the lease)", l.s.cfg.where, l.info.Name), lease.ErrNotHeld)
	}
	return nil
}

// keepHeld is ReleaseHeld with a positive hold: the lease stays taken for
// hold from now, by the server's clock, and then becomes free by itself: the
// row stays without an acquisition ID (nobody can renew or release it) until
// it expires, which waiters see as the holder's remaining time.
func (l *myLease) keepHeld(ctx context.Context, hold time.Duration) error {
	defer l.held.Done()
	n, err := l.exec(ctx, "release", l.s.q.hold, map[string]any{"name": l.info.Name, "id": l.info.ID, "holdus": storeopt.Millis(hold) * 1000})
	if err != nil {
		return err
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer had our row of lease %s at release (it expired, was deleted, or another holder took the lease)", l.s.cfg.where, l.info.Name), lease.ErrNotHeld)
	}
	return nil
}

// ReleaseHeld gives the lease up with a hold (lease.Holding): at once when
// hold is not positive, otherwise as keepHeld says.
func (l *myLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	return storeopt.ReleaseHeld(ctx, hold, l.Release, l.keepHeld)
}

var _ lease.Holding = (*myLease)(nil)
