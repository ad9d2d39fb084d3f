package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ---- MySQL/MariaDB ----

// newMyFaults injects faults into the server scripts/mariadb.sh started in
// c.myDir. mariadbd is one process (its connections are threads), so a
// signal to its PID pauses or kills the whole server. A kill, as a crash,
// loses no committed row (InnoDB's redo log;
// innodb_flush_log_at_trx_commit=2 loses only what the OS had not
// written, which a process crash does not lose).
func newMyFaults(d *driver) (storeFaults, error) {
	s, env, err := newScriptServer(d, serverSpec{store: "mysql", flag: "my", dir: d.c.myDir,
		script: filepath.Join(d.c.myScripts, "mariadb.sh"), proc: "mariadbd",
		pidVar: "LEADERRUN_TEST_MYSQL_PID", addrVar: "LEADERRUN_TEST_MYSQL_URL", addrIs: "URL"})
	if err != nil {
		return nil, err
	}
	u := env["LEADERRUN_TEST_MYSQL_URL"]
	return &serverFaults{scriptServer: s, keyKinds: []string{"key_delete", "key_edit"}, key: func(ctx context.Context, kind string) error {
		if kind == "key_edit" {
			// Another acquisition ID in the row: the holder's renewal
			// finds the row not ours.
			return myExec(ctx, d, u, kind, "UPDATE leaderrun_leases SET id = 'chaos-edit' WHERE name = ?", d.c.name)
		}
		// MariaDB's DELETE … RETURNING names the token of the lease removed.
		return myExec(ctx, d, u, kind, "DELETE FROM leaderrun_leases WHERE name = ? RETURNING coalesce(token, 0)", d.c.name)
	}}, nil
}

// myExec runs one statement on the server at URL u as an operator,
// logging fault kind first; the tokens it returns, if any (a RETURNING
// clause), are the change's (driver.changeTokens).
func myExec(ctx context.Context, d *driver, u, kind, query string, args ...any) error {
	pu, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("mysql: the URL does not parse")
	}
	c := mysql.NewConfig()
	c.User = pu.User.Username()
	c.Passwd, _ = pu.User.Password()
	c.Net, c.Addr, c.DBName = "tcp", pu.Host, strings.TrimPrefix(pu.Path, "/")
	c.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return d.changeTokens(kind, func() ([]uint64, error) {
		rows, err := db.QueryContext(cctx, query, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var tokens []uint64
		for rows.Next() {
			var t int64
			if err := rows.Scan(&t); err != nil {
				return tokens, err
			}
			if t > 0 {
				tokens = append(tokens, uint64(t))
			}
		}
		return tokens, rows.Err()
	})
}
