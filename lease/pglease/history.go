package pglease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// Run history (lease.History) is one more table beside the lease table,
// TABLE_runs, created on its first write like the lease table:
//
//	name text, token bigint, PRIMARY KEY (name, token), holder text,
//	started timestamptz, ended timestamptz (NULL: no end written),
//	outcome text, exit_code integer, signal text, version text
//
// A write is one statement: it upserts the run and deletes the runs of the
// name beyond the cap in the same statement (retention). The end of a run is
// the server's clock when its end record is written, like the start (the
// lease's since, which the server set), so a run's span never mixes two
// hosts' clocks. A run older than
// every kept one, with the history full, is not inserted at all. Rows with a
// token or start beyond the server's clock (and lease.MaxClockSkew) are not
// runs: they never count towards the cap, the write deletes them, readers
// skip them.

var _ lease.History = (*Store)(nil)

// historyQueries are the run history's statements for one lease table.
type historyQueries struct {
	table, create, record, runs string
}

func (s *Store) historyQueries() historyQueries {
	id := append(pgx.Identifier{}, s.cfg.table...)
	id[len(id)-1] += "_runs"
	r := strings.NewReplacer("{{R}}", id.Sanitize())
	return historyQueries{
		table: strings.Join(id, "."),
		create: r.Replace(`CREATE TABLE IF NOT EXISTS {{R}} (
	name      text NOT NULL,
	token     bigint NOT NULL,
	holder    text NOT NULL,
	started   timestamptz NOT NULL,
	ended     timestamptz,
	outcome   text NOT NULL DEFAULT '',
	exit_code integer NOT NULL DEFAULT 0,
	signal    text NOT NULL DEFAULT '',
	version   text NOT NULL DEFAULT '',
	PRIMARY KEY (name, token)
)`),
		// $1 name, $2 token, $3 holder, $4 started, $5 whether it ended
		// (the end is the server's clock, as the start, the lease's since),
		// $6 outcome, $7 exit code, $8 signal, $9 version, $10 runs to keep,
		// $11 the clock skew tolerated in microseconds (lease.MaxClockSkew).
		// b bounds the valid rows: tokens are at least the server's clock in
		// microseconds when minted, so a token or a start beyond the clock
		// (plus the skew) is no run (a forged or hand-written row): it never
		// counts and is deleted. cut is the lowest token kept, counting this
		// run: the DELETE sees the table as before the INSERT, so the new
		// token is counted in by hand, and a run below cut is not inserted.
		record: r.Replace(`WITH b AS (
	SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + $11::bigint AS tok,
		clock_timestamp() + $11::bigint * interval '1 microsecond' AS at
), cut AS (
	SELECT coalesce((SELECT t FROM (SELECT token AS t FROM {{R}}, b WHERE name = $1::text AND token <> $2::bigint
		AND token <= b.tok AND started <= b.at
		UNION ALL SELECT $2::bigint FROM b WHERE $2::bigint <= b.tok AND $4::timestamptz <= b.at) k
		ORDER BY t DESC OFFSET $10::integer - 1 LIMIT 1), 0) AS t
), ins AS (
	INSERT INTO {{R}} (name, token, holder, started, ended, outcome, exit_code, signal, version)
	SELECT $1::text, $2::bigint, $3::text, $4::timestamptz, CASE WHEN $5::boolean THEN clock_timestamp() END, $6::text, $7::integer, $8::text, $9::text
	FROM cut WHERE $2::bigint >= cut.t
	ON CONFLICT (name, token) DO UPDATE SET holder = EXCLUDED.holder, started = EXCLUDED.started,
		ended = EXCLUDED.ended, outcome = EXCLUDED.outcome, exit_code = EXCLUDED.exit_code,
		signal = EXCLUDED.signal, version = EXCLUDED.version
	RETURNING token
)
DELETE FROM {{R}} WHERE name = $1::text
	AND (token < (SELECT t FROM cut) OR token > (SELECT tok FROM b) OR started > (SELECT at FROM b))`),
		// $1 name, $2 limit (NULL: all), $3 the highest token and $4 the
		// latest start a valid run may have (the reader's clock plus the
		// skew: lease.CheckRun).
		runs: r.Replace(`SELECT token, holder, started, ended, outcome, exit_code, signal, version
FROM {{R}} WHERE name = $1::text AND token <= $3::bigint AND started <= $4::timestamptz
ORDER BY token DESC LIMIT $2::bigint`),
	}
}

// RecordRun writes r into the history of r.Name in one statement (see
// lease.History), creating the history table on first use.
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	q := s.historyQueries()
	return s.do(ctx, "record run of "+r.Name, false, func(ctx context.Context, c *pgx.Conn) error {
		exec := func() error {
			_, err := c.Exec(ctx, q.record, r.Name, int64(r.Token), r.Label, r.Start, r.Ended(),
				string(r.Outcome), r.ExitCode, r.Signal, r.Version, lease.HistoryKeep(keep), lease.MaxClockSkew.Microseconds())
			return err
		}
		err := exec()
		if isCode(err, "42P01") { // first use
			if err = s.createHistory(ctx, c, q); err == nil {
				err = exec()
			}
		}
		return err
	})
}

// createHistory creates the history table; a role that may not gets an
// ErrConfig that says what to create.
func (s *Store) createHistory(ctx context.Context, c *pgx.Conn, q historyQueries) error {
	_, err := c.Exec(ctx, q.create)
	switch {
	case err == nil || isCode(err, "42P07") || isCode(err, "23505"):
		return nil
	case isCode(err, "42501") || isCode(err, "3F000"):
		var pe *pgconn.PgError
		_ = errors.As(err, &pe)
		return lease.NewError(fmt.Sprintf("%s: the run history table %s does not exist and role %q may not create it (%s, SQLSTATE %s): "+
			"create it once as a role that may (CREATE TABLE %s (name text, token bigint, holder text, started timestamptz, ended timestamptz, outcome text, exit_code integer, signal text, version text, PRIMARY KEY (name, token))) and grant %q SELECT, INSERT, UPDATE, DELETE on it, or run with --history-keep 0",
			s.cfg.where, q.table, s.cfg.conn.User, storeerr.FirstLine(pe.Message), pe.Code, q.table, s.cfg.conn.User), lease.ErrConfig)
	}
	return err
}

// Runs returns up to limit runs of name, newest first (see lease.History).
// A history table not yet created is an empty history.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	q := s.historyQueries()
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	runs := []lease.Run{}
	b := lease.RunBounds{Name: name, Now: time.Now(), ClockTokens: true}
	latest := b.Now.Add(lease.MaxClockSkew)
	err := s.do(ctx, "read the run history of "+name, false, func(ctx context.Context, c *pgx.Conn) error {
		runs = runs[:0]
		rows, err := c.Query(ctx, q.runs, name, lim, latest.UnixMicro(), latest)
		if isCode(err, "42P01") {
			return nil // nothing recorded yet
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				r     = lease.Run{Name: name}
				tok   int64
				ended *time.Time
				out   string
			)
			if err := rows.Scan(&tok, &r.Label, &r.Start, &ended, &out, &r.ExitCode, &r.Signal, &r.Version); err != nil {
				return err
			}
			r.Token, r.Outcome = uint64(tok), lease.Outcome(out)
			r.Granted = r.Start // the lease's since: the server's clock at the grant
			if ended != nil {
				r.End = *ended
			}
			runs = append(runs, r)
		}
		err = rows.Err()
		if isCode(err, "42P01") {
			return nil // nothing recorded yet
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return lease.NewestRuns(runs, b, limit), nil
}
