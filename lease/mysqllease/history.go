package mysqllease

import (
	"context"
	"database/sql"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History) is one more table beside the lease table,
// TABLE_runs, created on its first write like the lease table:
//
//	name varchar, token bigint, PRIMARY KEY (name, token), holder varbinary,
//	started datetime(6), ended datetime(6) (NULL: no end written),
//	outcome varbinary, exit_code int, `signal` varbinary, version varbinary
//
// A write is one round trip: it finds the lowest token kept, upserts the
// run unless it is older than that, and deletes the runs of the name
// beyond the cap (retention). The end of a run is the server's clock when
// its end record is written, like the start (the lease's since, which the
// server set), so a run's span never mixes two hosts' clocks. Rows with a
// token or start beyond the server's clock (and lease.MaxClockSkew) are
// not runs: they never count towards the cap, the write deletes them,
// readers skip them.

var _ lease.History = (*Store)(nil)

// RecordRun writes r into the history of r.Name (see lease.History),
// creating the history table on first use.
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	query, args := bind(s.q.record, map[string]any{
		"name": r.Name, "token": int64(r.Token), "holder": []byte(r.Label), "started": r.Start.UTC(), "ended": r.Ended(),
		"outcome": []byte(r.Outcome), "code": int64(r.ExitCode), "sig": []byte(r.Signal), "version": []byte(r.Version),
		"off": int64(lease.HistoryKeep(keep) - 1), "skewus": lease.MaxClockSkew.Microseconds(),
	})
	return s.do(ctx, "record run of "+r.Name, []string{s.q.createRuns}, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, query, args...)
		return err
	})
}

// Runs returns up to limit runs of name, newest first (see lease.History).
// A history table not yet created is an empty history.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	b := lease.RunBounds{Name: name, Now: time.Now(), ClockTokens: true}
	latest := b.Now.Add(lease.MaxClockSkew)
	sqlText := s.q.runsAll
	args := map[string]any{"name": name, "tokmax": latest.UnixMicro(), "atmax": latest.UTC()}
	if limit > 0 {
		sqlText = s.q.runsSome
		args["lim"] = int64(limit)
	}
	query, a := bind(sqlText, args)
	runs := []lease.Run{}
	err := s.do(ctx, "read the run history of "+name, nil, func(ctx context.Context, c *sql.Conn) error {
		runs = runs[:0]
		rows, err := c.QueryContext(ctx, query, a...)
		if isNum(err, erNoSuchTable) {
			return nil // nothing recorded yet
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				run                          = lease.Run{Name: name}
				tok                          int64
				ended                        sql.NullTime
				holder, out, signal, version []byte
			)
			if err := rows.Scan(&tok, &holder, &run.Start, &ended, &out, &run.ExitCode, &signal, &version); err != nil {
				return err
			}
			run.Token, run.Label, run.Outcome = uint64(tok), string(holder), lease.Outcome(out)
			run.Signal, run.Version = string(signal), string(version)
			run.Granted = run.Start // the lease's since: the server's clock at the grant
			if ended.Valid {
				run.End = ended.Time
			}
			runs = append(runs, run)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return lease.NewestRuns(runs, b, limit), nil
}
