package e2e

// Black-box tests of leaderrun (through leaderrun-mysql) on a real MariaDB
// server. Tests that only add rows use the shared server
// (LEADERRUN_TEST_MYSQL_URL, scripts/mariadb.sh), each with its own lease
// names; tests that freeze or kill the server start a private one with
// scripts/mariadb.sh and stop it by PID. mariadbd is one process (its
// connections are threads), so kill(2) to its PID freezes or kills it all.

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

const myE2EEnv = "LEADERRUN_TEST_MYSQL_URL"

// myStore is the MariaDB server for the shared store tests
// (storefaults_test.go).
var myStore = faultStore{
	envVar:      myE2EEnv,
	pidVar:      "LEADERRUN_TEST_MYSQL_PID",
	storeURL:    func(raw string) string { return raw },
	script:      "scripts/mariadb.sh",
	benchScript: "scripts/mariadb.sh",
	wakeBy:      "its poll of the row",
	holdWrites:  myHoldWrites,
}

// myE2EDB opens a plain connection pool to the server at raw, as an
// operator (not leaderrun).
func myE2EDB(t testing.TB, raw string) *sql.DB { return leasetest.MySQLOperator(t, raw) }

// myE2EExec runs one statement on raw as an operator (not leaderrun) and
// returns the rows it changed.
func myE2EExec(t *testing.T, raw, query string, args ...any) int64 {
	t.Helper()
	res, err := myE2EDB(t, raw).ExecContext(ctxTimeout(t, 30*time.Second), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	n, _ := res.RowsAffected()
	return n
}

// myHoldWrites takes a READ lock on the lease table of the server at raw (a
// renewal's UPDATE waits; reads go on) on a connection it keeps until the
// test ends, and returns the expiry of lease name from its row (expires −
// UTC_TIMESTAMP(6) on the server).
func myHoldWrites(t testing.TB, raw, name string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := myE2EDB(t, raw).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(ctx, "LOCK TABLES leaderrun_leases READ"); err != nil {
		t.Fatalf("locking the lease table: %v", err)
	}
	var end time.Duration
	for range 20 { // as redisLeaseEnd: the latest of reads, until a quick one
		var us int64
		asked := lease.BootClock{}.Now()
		if err := conn.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires) FROM leaderrun_leases WHERE name = ?", name).Scan(&us); err != nil {
			t.Fatalf("reading the expiry of %s: %v", name, err)
		}
		end = max(end, asked+time.Duration(us)*time.Microsecond)
		if rtt := (lease.BootClock{}).Now() - asked; rtt < tightRTT {
			break
		}
	}
	return end
}

// The shared store tests on MariaDB (storefaults_test.go). A clean release
// is seen by the waiters at the front of the line at their next read of
// the row (every 250ms); after a leader is SIGKILLed a waiter takes over
// at the expiry the server reported.
func TestMySQLManyInstancesNoOverlap(t *testing.T) { testManyInstances(t, myStore) }
func TestMySQLNoWaitConflict(t *testing.T)         { testNoWaitConflict(t, myStore) }
func TestMySQLCleanHandover(t *testing.T)          { testCleanHandover(t, myStore) }
func TestMySQLLeaderKilledFailover(t *testing.T)   { testLeaderKilledFailover(t, myStore) }
func TestMySQLTokensIncrease(t *testing.T)         { testTokensIncrease(t, myStore) }

// The server frozen (SIGSTOP) or killed under a running leader: the child
// is dead (by the kernel's clock) before the lease's expiry in its row
// (expires − UTC_TIMESTAMP(6) on the server); exit 124 (testServerFault).
func TestMySQLServerFaultStopsChild(t *testing.T) { testServerFaults(t, myStore) }

// The row deleted, or given another acquisition ID, by someone else under a
// running leader: the next renewal finds no row with our ID, the child is
// stopped within one renew interval, exit 124 (testRecordBroken).
func TestMySQLRowDeletedStopsChild(t *testing.T) {
	t.Parallel()
	testRecordBroken(t, myStore, func(raw, name string) {
		if n := myE2EExec(t, raw, "DELETE FROM leaderrun_leases WHERE name = ?", name); n != 1 {
			t.Fatalf("deleted %d rows; want the lease's", n)
		}
	})
}

func TestMySQLRowEditedStopsChild(t *testing.T) {
	t.Parallel()
	testRecordBroken(t, myStore, func(raw, name string) {
		if n := myE2EExec(t, raw, "UPDATE leaderrun_leases SET id = 'edited-by-hand' WHERE name = ?", name); n != 1 {
			t.Fatalf("changed %d rows; want the lease's", n)
		}
	})
}

// The password, in the URL, MYSQL_PWD or an option file, right or wrong,
// never shows on stderr or in status's output, in text or JSON logs;
// MYSQL_PWD does not reach the child unless --pass-env names it.
func TestMySQLPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	raw, _ := myStore.shared(t)
	pass, withPass := passwordURL(t, raw)
	const wrong = "Wr0ngS3cretPW"
	dir := t.TempDir()
	optFile := func(p string) string {
		f := filepath.Join(dir, "my-"+p+".cnf")
		if err := os.WriteFile(f, []byte("[client]\npassword = \""+p+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return withPass("") + "?option-file=" + url.QueryEscape(f)
	}
	home := []string{"HOME=" + dir} // no ~/.my.cnf
	testSecretsNotPrinted(t, []string{pass, wrong}, []secretCase{
		{"url", withPass(pass), nil, true},
		{"env", withPass(""), []string{"MYSQL_PWD=" + pass}, true},
		{"option-file", optFile(pass), nil, true},
		{"url-wrong", withPass(wrong), nil, false},
		{"env-wrong", withPass(""), []string{"MYSQL_PWD=" + wrong}, false},
		{"option-file-wrong", optFile(wrong), nil, false},
	}, home, func(t *testing.T) string { return e2eName(t, "pw") },
		"sh", "-c", `test -z "$MYSQL_PWD"`)
}

// Bad input is one line on stderr, exit 125, no child, no password: an
// unknown query parameter, a host with a password in the wrong place, and
// an option file that is a FIFO (whose open would block for ever deaf to
// signals) or a device without end. The port is never dialled.
func TestMySQLBadURL(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	const secret = "Sup3rS3cretPw"
	for _, tc := range []struct{ name, url, want string }{
		{"param", "mysql://u:" + secret + "@127.0.0.1:1/db?tsl=true", "unknown query parameter"},
		{"host", "mysql://127.0.0.1:" + secret + "/db", "not HOST[:PORT]"},
		{"fifo", "mysql://u@127.0.0.1:1/db?option-file=" + url.QueryEscape(fifo), "not a regular file"},
		{"device", "mariadb://u@127.0.0.1:1/db?option-file=/dev/zero", "not a regular file"},
		{"tls", "mysql://u:" + secret + "@127.0.0.1:1/db?tls=maybe", "tls= wants"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runLR(t, []string{"MYSQL_PWD=", "HOME=/nonexistent"}, "--store", tc.url, "--wait", "0", "--", "touch", marker)
			if code != 125 {
				t.Fatalf("exit %d; want 125: %s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, secret) {
				t.Fatalf("stderr %q; want one line saying %q, without the password", stderr, tc.want)
			}
			if unix.Access(marker, unix.F_OK) == nil {
				t.Fatal("the child ran")
			}
		})
	}
}

func init() { readmeChecks["my-table"] = readmeMyTable }

// readmeMyTable: the documented CREATE statements, run as they are (on a
// fresh table name), make tables that leaderrun uses without creating
// anything, and that have the columns (types, character sets, nullability)
// of the tables leaderrun creates itself.
func readmeMyTable(t *testing.T, _ *readmeFixture, b *readmeBlock) {
	raw := requireEnv(t, myE2EEnv)
	mine := "readme_" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano(), 36))
	auto := mine + "_auto"
	db := myE2EDB(t, raw)
	ctx := ctxTimeout(t, 30*time.Second)
	for _, stmt := range strings.Split(strings.ReplaceAll(strings.Join(b.body, "\n"), "leaderrun_leases", mine), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s:%d: the CREATE statements fail: %v", b.file, b.line, err)
		}
	}
	for _, table := range []string{mine, auto} {
		env := []string{"LEADERRUN_STORE=" + raw + "?table=" + table}
		if code, stderr := runLR(t, env, "--name", "readme", "--", "true"); code != 0 {
			t.Fatalf("leaderrun on table %s: exit %d: %s", table, code, stderr)
		}
	}
	// A standby that waits a moment on the auto table makes its standbys'
	// table.
	env := []string{"LEADERRUN_STORE=" + raw + "?table=" + auto}
	_, release := leaderUntilStdin(t, env, "readme", nil)
	if code, stderr := runLR(t, env, "--name", "readme", "--wait", "1s", "--", "true"); code != 75 {
		t.Fatalf("a standby on table %s: exit %d: %s", auto, code, stderr)
	}
	release()
	columns := func(table string) string {
		var s sql.NullString
		err := db.QueryRowContext(ctx, `SELECT GROUP_CONCAT(CONCAT_WS(' ', COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(COLLATION_NAME, '-'), COLUMN_KEY, COALESCE(COLUMN_DEFAULT, '-')) ORDER BY ORDINAL_POSITION SEPARATOR ', ')
			FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s.String
	}
	for _, suffix := range []string{"", "_standbys", "_runs"} {
		if a, b2 := columns(mine+suffix), columns(auto+suffix); a != b2 || a == "" {
			t.Fatalf("%s:%d: the documented table %s has columns %q; leaderrun creates %q", b.file, b.line, mine+suffix, a, b2)
		}
	}
}
