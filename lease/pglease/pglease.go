// Package pglease keeps leaderrun's leases in a PostgreSQL table, through
// pgx v5: a holder keeps one connection for its calls; a waiting instance
// at the front of the line keeps one that LISTENs for releases while the
// server has room for it (none further back, and none under wait=poll:
// see wait.go) and opens its query connection only for a check or a
// heartbeat.
//
// # Data
//
// One table (default leaderrun_leases, or ?table=NAME / SCHEMA.NAME in the
// URL) with one row per held lease, and one sequence TABLE_token:
//
//	name text PRIMARY KEY, holder text, id text, token bigint,
//	since timestamptz, ttl_ms bigint, expires timestamptz
//
// Both are created on first use (CREATE … IF NOT EXISTS, only when a
// statement finds the table missing, so start-up costs nothing); a role that
// may not create them gets an error wrapping lease.ErrConfig that says what
// to create. Every change is one statement, so one round trip:
//
//   - acquire: INSERT … ON CONFLICT (name) DO UPDATE … WHERE the row has
//     expired (or already carries our acquisition ID: a retry of an attempt
//     whose answer was lost) RETURNING the token; when nothing is returned
//     the same statement reports the current holder;
//   - renew: UPDATE the expiry WHERE the ID matches and the row has not
//     expired (never re-creating a vanished row);
//   - release: DELETE WHERE the ID matches, and pg_notify in the same
//     statement, so the notification goes out exactly when the delete
//     commits;
//   - release with a hold (lease.Holding): UPDATE WHERE the ID matches,
//     clearing the ID and setting the expiry to the hold's end.
//
// The standbys (lease.CandidateRegistry) are rows of a second table,
// TABLE_standbys (see candidates.go).
//
// # Time
//
// Expiry is computed and checked by the server alone: expires =
// clock_timestamp() + ttl when the statement runs, which is no earlier than
// when the client sent it, so a holder that counts its deadline from its own
// send time never overestimates; "expired" means expires <= clock_timestamp().
// No client clock is read for a safety decision. Every call is bounded by
// Options.CallTimeout and the caller's context (pgx interrupts the socket at
// the deadline) and by statement_timeout on the server.
//
// # Fencing tokens
//
// token = greatest(nextval(TABLE_token), the server's clock in microseconds),
// minted under a transaction-scoped advisory lock on the lease name, taken
// before the token is computed, so two acquisitions of one name can never
// commit their tokens out of order. Tokens strictly increase per name; they
// stay above every earlier token even when the sequence is lost or behind (a
// restored backup, a failover to a replica that missed the last WAL) as long
// as the server's clock does not step back; and they stay below 2^53.
//
// # What is not guaranteed
//
// The lease is as safe as the primary that stores it. Replication to standbys
// is asynchronous unless synchronous_commit says otherwise, so a failover can
// lose a just-written row (two holders); the fencing token still does not go
// back (see above). A clock step on the server moves every expiry. Release
// notifications are hints: waiters fall back to sleeping until the row's
// expiry as the server reports it.
package pglease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// call (and a connection a call has to make itself) and is the server's
// statement_timeout; Connect (lease.Connector) sets a connection up within
// the caller's bound instead. Getenv
// reads PGPASSWORD (EnvPassword) when the URL has no password; the other
// PG* variables (PGHOST, PGUSER, PGPASSFILE, PGSSLMODE, …) are read by pgx
// from the process environment itself, as libpq does. Log receives debug
// messages (the LISTEN connection dropping and coming back).
type Options = lease.OpenOptions

// Store is a lease.Store on PostgreSQL. It is safe for concurrent use (calls
// take turns on one connection); Close it when done.
type Store struct {
	cfg         *config
	callTimeout time.Duration
	log         *slog.Logger
	q           queries

	// turns is the query connection, which calls take turns on; its Life
	// owns the listener goroutine. It is marked closed under mu, so that
	// listen starts no goroutine after Close waited for them.
	turns *turns.Conn[*pgx.Conn]

	mu  sync.Mutex
	lis *listener
	wg  sync.WaitGroup

	// places is where this store's standbys stand (candidates.go).
	places *line.Places
}

var (
	_ lease.Store     = (*Store)(nil)
	_ lease.Connector = (*Store)(nil)
	_ lease.Connector = (*pgLease)(nil)
)

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
	cc := c.conn
	// One round trip per statement, no prepared statements (works behind
	// PgBouncer too); parameter types come from the casts in the SQL.
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	cc.StatementCacheCapacity = 0
	cc.DescriptionCacheCapacity = 0
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(1, o.CallTimeout.Milliseconds()), 10)
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "leaderrun"
	}
	s := &Store{
		cfg:         c,
		callTimeout: o.CallTimeout,
		log:         o.Log.With("store", c.display),
		q:           newQueries(c.table, c.tableS),
		turns:       turns.New(closeNow),
		places:      line.New(listenFront),
	}
	err = s.do(ctx, "connect", false, func(context.Context, *pgx.Conn) error { return nil })
	if err != nil {
		if errors.Is(err, lease.ErrUnavailable) && ctx.Err() == nil {
			s.log.Debug("postgres not reachable yet", "err", err)
			return s, nil
		}
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// String returns the store URL without the password.
func (s *Store) String() string { return s.cfg.display }

// Table returns the lease table as given (NAME or SCHEMA.NAME).
func (s *Store) Table() string { return s.cfg.tableS }

func (s *Store) classify(op string, err error) error {
	return classify(s.cfg.where, op, err, s.cfg.secrets)
}

// Connect sets up the store's connection when it has none (the
// lease.Connector a waiting instance's query connection and a holder's
// broken one are made again by), bounded by ctx alone: a login on a loaded
// server may take longer than a call may, and it is no part of a lease's
// time. The next call uses it.
func (s *Store) Connect(ctx context.Context) error {
	var ct callTimes
	ct.mark()
	if err := s.takeTurn(ctx, "connect", &ct); err != nil {
		return err
	}
	defer s.turns.Give()
	if s.turns.Closed() {
		return s.classify("connect", errClosed)
	}
	if c := s.turns.Get(); c != nil && !c.IsClosed() {
		return nil
	}
	return s.open(ctx, "connect", &ct)
}

// connect opens a connection bounded by ctx.
func (s *Store) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.ConnectConfig(ctx, s.cfg.conn.Copy())
}

// do runs fn on the store's connection (connecting first when needed),
// bounded by ctx and the call timeout, and classifies its error. With
// create, a statement that finds the table missing creates it and runs once
// more. A connection that failed in a way that may have left it unusable is
// closed, so the next call connects afresh.
func (s *Store) do(ctx context.Context, op string, create bool, fn func(context.Context, *pgx.Conn) error) error {
	return s.call(ctx, op, create, false, fn)
}

// doIfConnected is do on the store's connection when it is open; when it
// is not, it does nothing and returns nil.
func (s *Store) doIfConnected(ctx context.Context, op string, fn func(context.Context, *pgx.Conn) error) error {
	return s.call(ctx, op, false, true, fn)
}

// call is do; with ifConnected it does nothing when the store's connection
// is not open.
func (s *Store) call(ctx context.Context, op string, create, ifConnected bool, fn func(context.Context, *pgx.Conn) error) error {
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	var ct callTimes
	ct.mark()
	if err := s.takeTurn(cctx, op, &ct); err != nil {
		return err
	}
	defer s.turns.Give()
	if s.turns.Closed() {
		return s.classify(op, errClosed)
	}
	if err := cctx.Err(); err != nil {
		return s.classify(ct.explain(op, err), err)
	}
	if c := s.turns.Get(); c == nil || c.IsClosed() {
		if ifConnected {
			return nil
		}
		if err := s.open(cctx, op, &ct); err != nil {
			return err
		}
	}
	err := fn(cctx, s.turns.Get())
	ct.statement += ct.mark()
	if idleClosed(err) {
		// The server had ended the session while it sat idle
		// (idle_session_timeout, idle_in_transaction_session_timeout): the
		// statement never ran, so it runs once more on a new connection.
		s.turns.Drop()
		c, cerr := s.connect(cctx)
		ct.connect += ct.mark()
		if cerr != nil {
			return s.classify(ct.explain(op, cerr), cerr)
		}
		s.turns.Set(c)
		err = fn(cctx, c)
		ct.statement += ct.mark()
	}
	if create && isCode(err, "42P01") { // undefined_table: first use
		if err = s.createTable(cctx, s.turns.Get()); err == nil {
			err = fn(cctx, s.turns.Get())
		}
		ct.statement += ct.mark()
	}
	if ct.total() > s.callTimeout/2 {
		s.log.Debug("slow store call", "op", op, "queued", ct.queued, "connect", ct.connect, "statement", ct.statement, "err", err)
	}
	if err != nil {
		if le := (*lease.Error)(nil); errors.As(err, &le) {
			return err // already ours
		}
		s.dropBroken(err)
		return s.classify(ct.explain(op, err), err)
	}
	return nil
}

// takeTurn waits for the store's connection (calls take turns on it), at
// most until cctx is done; when it returns nil, the caller has the turn and
// gives it back with s.turns.Give.
func (s *Store) takeTurn(cctx context.Context, op string, ct *callTimes) error {
	err := s.turns.Take(cctx)
	ct.queued = ct.mark()
	if err != nil {
		return s.classify(ct.explain(op, err), err)
	}
	return nil
}

// open makes the store's connection, for a call that has the turn.
func (s *Store) open(cctx context.Context, op string, ct *callTimes) error {
	c, err := s.connect(cctx)
	ct.connect += ct.mark()
	if err != nil {
		if isCode(err, "53300") {
			s.pressure() // too many connections: our LISTEN one goes first
		}
		return s.classify(ct.explain(op, err), err)
	}
	s.turns.Set(c)
	return nil
}

// callTimes is where one store call spent its time: waiting for the
// store's previous call (calls take turns on one connection), connecting
// and logging in, and in its statements.
type callTimes struct {
	last                       time.Time
	queued, connect, statement time.Duration
}

// mark returns the time since the previous mark.
func (ct *callTimes) mark() time.Duration {
	now := time.Now()
	d := now.Sub(ct.last)
	if ct.last.IsZero() {
		d = 0
	}
	ct.last = now
	return d
}

func (ct *callTimes) total() time.Duration { return ct.queued + ct.connect + ct.statement }

// explain adds to op, when err is a timeout, where the call's time went: a
// call that timed out on the client's side says whether it waited for
// another call, for the connection and login, or for the server's answer.
func (ct *callTimes) explain(op string, err error) string {
	if !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) && !isCode(err, "57014") {
		return op
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%s; %v waiting for this store's previous call, %v connecting and logging in, %v in statements",
		op, r(ct.queued), r(ct.connect), r(ct.statement))
}

// dropBroken closes the connection after an error that was not a plain
// statement failure: a network error or timeout (the socket may be mid
// message), or a read-only standby (reconnecting may reach the new primary).
func (s *Store) dropBroken(err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code != "25006" && pe.Code != "57014" {
		return
	}
	s.turns.Drop()
}

// closeNow closes c without waiting for the server to read the goodbye.
func closeNow(c *pgx.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Close(ctx)
}

// idleClosed reports whether err says the server closed the session for
// sitting idle: 57P05 (idle_session_timeout) or 25P03
// (idle_in_transaction_session_timeout). The server sends it when it ends
// the session, before any later statement; pgx reads it with the next one.
func idleClosed(err error) bool { return isCode(err, "57P05") || isCode(err, "25P03") }

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// createTable creates the sequence and the table if missing. Concurrent
// creators race harmlessly (the duplicate-object errors 42P07, 42710 and
// 23505 of the loser are ignored); a role without the right gets an
// ErrConfig that says what to do.
func (s *Store) createTable(ctx context.Context, c *pgx.Conn) error {
	for _, stmt := range []string{s.q.createSeq, s.q.createTable} {
		_, err := c.Exec(ctx, stmt)
		if err == nil || isCode(err, "42P07") || isCode(err, "42710") || isCode(err, "23505") {
			continue
		}
		if isCode(err, "42501") || isCode(err, "3F000") {
			var pe *pgconn.PgError
			errors.As(err, &pe)
			return lease.NewError(fmt.Sprintf("%s: the lease table %s does not exist and role %q may not create it (%s, SQLSTATE %s): "+
				"create it once as a role that may (the statements are in docs/stores.md, section PostgreSQL) and grant %q SELECT, INSERT, UPDATE, DELETE on it and USAGE on the sequence %s",
				s.cfg.where, s.cfg.tableS, s.cfg.conn.User, storeerr.FirstLine(pe.Message), pe.Code, s.cfg.conn.User, s.q.seqName), lease.ErrConfig)
		}
		return err
	}
	s.log.Debug("created the lease table", "table", s.cfg.tableS)
	return nil
}

// TryAcquire makes one attempt, in one statement. A *lease.HeldError carries
// the current holder, token, since and remaining time. Retrying with the same
// req.ID after a lost answer succeeds while the lease is still ours (same
// token, expiry restarted). req.TTL below MinTTL wraps lease.ErrConfig.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := storeopt.CheckRequest(req.ID, req.TTL, "PostgreSQL", MinTTL); err != nil {
		return nil, err
	}
	ttl := storeopt.Millis(req.TTL)
	var (
		got       bool
		ours      bool
		holder    string
		token     int64
		since     time.Time
		ttlMs     int64
		remMs     int64
		heldUntil *time.Time
	)
	err := s.do(ctx, "acquire "+req.Name, true, func(ctx context.Context, c *pgx.Conn) error {
		got = false
		err := c.QueryRow(ctx, s.q.acquire, req.Name, req.Label, req.ID, ttl, s.q.lockKey(req.Name)).
			Scan(&ours, &holder, &token, &since, &ttlMs, &remMs, &heldUntil)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		got = err == nil
		return err
	})
	if err != nil {
		return nil, err
	}
	if got && ours {
		s.stopListening()
		if err := s.checkToken(ctx, req, ttl, token, since); err != nil {
			return nil, err
		}
		return &pgLease{s: s, ttl: ttl, held: s.turns.Hold(), info: lease.Holder{
			Name: req.Name, Label: req.Label, ID: req.ID, Token: uint64(token),
			Since: since, TTL: time.Duration(ttl) * time.Millisecond, Granted: since.UTC(),
		}}, nil
	}
	if !got {
		// The holder committed after this statement's snapshot: read it now.
		h, err := s.Status(ctx, req.Name)
		if err != nil || h == nil {
			return nil, &lease.HeldError{By: lease.Holder{Name: req.Name}}
		}
		return nil, &lease.HeldError{By: *h}
	}
	return nil, &lease.HeldError{By: holderOf(req.Name, holder, token, since, ttlMs, remMs, heldUntil)}
}

// checkToken refuses an acquisition whose token cannot be used: past 2^53,
// or ahead of the server's clock (since is the server's clock_timestamp()
// of the same statement). The row is taken out again at once (best
// effort), so the lease is not blocked for the TTL by an acquisition that
// never ran anything.
func (s *Store) checkToken(ctx context.Context, req lease.Request, ttl, token int64, since time.Time) error {
	var err error
	switch {
	case token <= 0 || token > maxToken:
		err = lease.NewError(fmt.Sprintf("%s: acquire %s: bad fencing token %d (the sequence %s was set past 2^53?)", s.cfg.where, req.Name, token, s.q.seqName))
	case lease.TokenAhead(uint64(token), since):
		err = lease.TokenAheadError(req.Name, uint64(token), since,
			fmt.Sprintf("the sequence %s at %s (ALTER SEQUENCE … RESTART)", s.q.seqName, s.cfg.where))
	default:
		return nil
	}
	bad := &pgLease{s: s, ttl: ttl, info: lease.Holder{Name: req.Name, ID: req.ID}} // held nil: never counted as held
	_ = bad.Release(context.WithoutCancel(ctx))
	return err
}

// holderOf builds a Holder from a row; heldUntil, when not nil, is the end
// of a hold (ReleaseHeld) on the server's clock.
func holderOf(name, holder string, token int64, since time.Time, ttlMs, remMs int64, heldUntil *time.Time) lease.Holder {
	h := lease.Holder{Name: name, Label: holder, Since: since}
	if token > 0 && token <= maxToken {
		h.Token = uint64(token)
	}
	if ttlMs > 0 {
		h.TTL = time.Duration(ttlMs) * time.Millisecond
	}
	if remMs > 0 {
		h.Remaining = time.Duration(remMs) * time.Millisecond
	}
	if heldUntil != nil {
		h.HeldUntil = *heldUntil
	}
	return h
}

// Status returns the current holder (ID left out) with its remaining time as
// the server computes it, or nil when the lease is free (no row, an expired
// row, or no table yet).
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	var h *lease.Holder
	err := s.do(ctx, "status "+name, false, func(ctx context.Context, c *pgx.Conn) error {
		h = nil
		var (
			holder       string
			token        int64
			since        time.Time
			ttlMs, remMs int64
			heldUntil    *time.Time
		)
		err := c.QueryRow(ctx, s.q.status, name).Scan(&holder, &token, &since, &ttlMs, &remMs, &heldUntil)
		switch {
		case errors.Is(err, pgx.ErrNoRows), isCode(err, "42P01"):
			return nil
		case err != nil:
			return err
		}
		v := holderOf(name, holder, token, since, ttlMs, remMs, heldUntil)
		h = &v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Limits: PostgreSQL leases expire; the TTL is kept in whole milliseconds.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{Expires: true, Epsilon: epsilon, MinTTL: MinTTL, TTLUnit: time.Millisecond}
}

// Close stops the LISTEN connection, waits for its goroutine and closes the
// store's connection. Leases from this store must not be used afterwards.
// Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	first := s.turns.Shut()
	s.mu.Unlock()
	if !first {
		return nil
	}
	s.wg.Wait()
	s.turns.CloseConn(func(c *pgx.Conn) {
		ctx, cancel := context.WithTimeout(context.Background(), min(s.callTimeout, time.Second))
		defer cancel()
		_ = c.Close(ctx)
	})
	return nil
}

// pgLease is one acquisition.
type pgLease struct {
	s    *Store
	ttl  int64
	info lease.Holder
	held *turns.Lease // counted out when released (or released with a hold)
}

func (l *pgLease) Info() lease.Holder { return l.info }

// Connect is the store's Connect: a renewal after a broken connection logs
// in again within the keeper's bound, not the call timeout.
func (l *pgLease) Connect(ctx context.Context) error { return l.s.Connect(ctx) }

// Renew moves the expiry to the server's clock + TTL if the row still
// carries our ID and has not expired. It wraps lease.ErrLost when it does
// not; any other error means "unknown outcome".
func (l *pgLease) Renew(ctx context.Context) error {
	var n int64
	err := l.s.do(ctx, "renew "+l.info.Name, false, func(ctx context.Context, c *pgx.Conn) error {
		tag, err := c.Exec(ctx, l.s.q.renew, l.info.Name, l.info.ID, l.ttl)
		if isCode(err, "42P01") {
			return lease.NewError(fmt.Sprintf("%s: the lease table %s is gone, and our lease %s with it", l.s.cfg.where, l.s.cfg.tableS, l.info.Name), lease.ErrLost)
		}
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer has our row of lease %s (it expired, was deleted, or another holder took the lease)", l.s.cfg.where, l.info.Name), lease.ErrLost)
	}
	return nil
}

// Release deletes the row if it still carries our ID and NOTIFYs waiters in
// the same statement (the notification is delivered when the delete
// commits). It wraps lease.ErrNotHeld when the row is gone, another
// holder's, or had already expired.
func (l *pgLease) Release(ctx context.Context) error {
	defer l.held.Done()
	found, live := false, false
	err := l.s.do(ctx, "release "+l.info.Name, false, func(ctx context.Context, c *pgx.Conn) error {
		var notified bool
		err := c.QueryRow(ctx, l.s.q.release, l.info.Name, l.info.ID, l.s.q.channel).Scan(&live, &notified)
		switch {
		case errors.Is(err, pgx.ErrNoRows), isCode(err, "42P01"):
			return nil
		case err != nil:
			return err
		}
		found = true
		return nil
	})
	if err != nil {
		return err
	}
	if !found || !live {
		return lease.NewError(fmt.Sprintf("%s no longer had our row of lease %s at release (it expired, was deleted, or another holder took the lease)", l.s.cfg.where, l.info.Name), lease.ErrNotHeld)
	}
	return nil
}
