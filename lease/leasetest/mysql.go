package leasetest

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// MySQLOperator opens a plain connection pool to the MySQL or MariaDB
// server of the store URL raw (mysql://USER:PASSWORD@HOST:PORT/DB), as
// an operator, not the store: for a test that deletes rows, creates users
// or locks tables behind the store's back. Times are parsed, and a call
// may hold several statements. t.Cleanup closes it.
func MySQLOperator(t testing.TB, raw string) *sql.DB {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := mysql.NewConfig()
	c.User = u.User.Username()
	c.Passwd, _ = u.User.Password()
	c.Net, c.Addr, c.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	c.ParseTime, c.MultiStatements = true, true
	conn, err := mysql.NewConnector(c)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
