package e2e

// Black-box tests of leaderrun (through leaderrun-postgres) on a real
// PostgreSQL server. Tests that only add rows use the shared server of
// scripts/test.sh (LEADERRUN_TEST_POSTGRES_URL), each with its own lease
// names; tests that freeze or kill the server start a private one with
// scripts/postgres.sh and stop it by PID.

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

const pgE2EEnv = "LEADERRUN_TEST_POSTGRES_URL"

// pgStore is the PostgreSQL server for the shared store tests
// (storefaults_test.go). Its backends run in sessions of their own, so a
// fault goes to the postmaster and every backend (leasetest.SignalServer).
var pgStore = faultStore{
	envVar:      pgE2EEnv,
	pidVar:      "LEADERRUN_TEST_POSTGRES_PID",
	storeURL:    func(raw string) string { return raw },
	script:      "scripts/postgres.sh",
	benchScript: "scripts/bench-postgres.sh",
	signal:      leasetest.SignalServer,
	wakeBy:      "the NOTIFY",
	holdWrites:  pgHoldWrites,
}

// pgE2EShared returns the shared server's URL and the env selecting it.
func pgE2EShared(t *testing.T) (raw string, env []string) { return pgStore.shared(t) }

// pgE2EExec runs one statement on raw as an operator (not leaderrun).
func pgE2EExec(t *testing.T, raw, sql string, args ...any) {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	c, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func init() { readmeChecks["pg-table"] = readmePgTable }

// readmePgTable: the README's CREATE statements, run as they are (on a
// fresh table name), make a table that leaderrun uses without creating
// anything, and that has the columns of the table leaderrun creates itself.
func readmePgTable(t *testing.T, _ *readmeFixture, b *readmeBlock) {
	raw := requireEnv(t, pgE2EEnv)
	mine := "readme_" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano(), 36))
	auto := mine + "_auto"
	sql := strings.ReplaceAll(strings.Join(b.body, "\n"), "leaderrun_leases", mine)
	ctx := ctxTimeout(t, 30*time.Second)
	c, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatalf("%s:%d: the CREATE statements fail: %v", b.file, b.line, err)
	}
	for _, table := range []string{mine, auto} {
		env := []string{"LEADERRUN_STORE=" + raw + "&table=" + table}
		if code, stderr := runLR(t, env, "--name", "readme", "--", "true"); code != 0 {
			t.Fatalf("leaderrun on table %s: exit %d: %s", table, code, stderr)
		}
	}
	columns := func(table string) string {
		var s string
		err := c.QueryRow(ctx, `SELECT string_agg(column_name || ' ' || data_type || ' ' || is_nullable, ', ' ORDER BY ordinal_position)
			FROM information_schema.columns WHERE table_name = $1`, table).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A standby that waits a moment on the auto table makes its standbys'
	// table.
	env := []string{"LEADERRUN_STORE=" + raw + "&table=" + auto}
	_, release := leaderUntilStdin(t, env, "readme", nil)
	if code, stderr := runLR(t, env, "--name", "readme", "--wait", "1s", "--", "true"); code != 75 {
		t.Fatalf("a standby on table %s: exit %d: %s", auto, code, stderr)
	}
	release()
	for _, suffix := range []string{"", "_standbys", "_runs"} {
		if a, b2 := columns(mine+suffix), columns(auto+suffix); a != b2 || a == "" {
			t.Fatalf("%s:%d: the documented table %s has columns %q; leaderrun creates %q", b.file, b.line, mine+suffix, a, b2)
		}
	}
}

// The shared store tests on PostgreSQL (storefaults_test.go). A clean
// release wakes a waiter by NOTIFY (how fast, 5–9ms p50 here, is
// BenchmarkPostgresHandover's to say: under the whole suite on 2 busy cores
// a try took up to 124ms); after a leader is SIGKILLed the waiter sleeps
// until the expiry the server reports.
func TestPostgresManyInstancesNoOverlap(t *testing.T) { testManyInstances(t, pgStore) }
func TestPostgresNoWaitConflict(t *testing.T)         { testNoWaitConflict(t, pgStore) }
func TestPostgresCleanHandover(t *testing.T)          { testCleanHandover(t, pgStore) }
func TestPostgresLeaderKilledFailover(t *testing.T)   { testLeaderKilledFailover(t, pgStore) }
func TestPostgresTokensIncrease(t *testing.T)         { testTokensIncrease(t, pgStore) }

// The server frozen (SIGSTOP to the postmaster and every backend) or killed
// under a running leader: the child is dead (by the kernel's clock) before
// the lease's expiry in its row (expires − clock_timestamp() on the server);
// exit 124 (testServerFault). bench-postgres.sh reports the MARGIN lines.
func TestPostgresServerFaultStopsChild(t *testing.T) {
	t.Parallel()
	t.Run("stop", func(t *testing.T) { t.Parallel(); testServerFault(t, pgStore, syscall.SIGSTOP, false) })
	t.Run("kill", func(t *testing.T) { t.Parallel(); testServerFault(t, pgStore, syscall.SIGKILL, false) })
}

// The row deleted by someone else under a running leader: the next renewal
// finds no row with our ID, the child is stopped within one renew interval,
// exit 124 (testRecordBroken).
func TestPostgresRowDeletedStopsChild(t *testing.T) {
	t.Parallel()
	testRecordBroken(t, pgStore, func(raw, name string) {
		pgE2EExec(t, raw, "DELETE FROM leaderrun_leases WHERE name = $1", name)
	})
}

// The password, in the URL or PGPASSWORD, right or wrong, never shows on
// stderr or in status's output, in text or JSON logs; PGPASSWORD does not
// reach the child unless --pass-env names it.
func TestPostgresPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	raw, _ := pgE2EShared(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	pass, _ := u.User.Password()
	const wrong = "Wr0ngS3cretPW"
	user := u.User.Username()
	withPass := func(p string) string {
		v := *u
		if p == "" {
			v.User = url.User(user)
		} else {
			v.User = url.UserPassword(user, p)
		}
		return v.String()
	}
	testSecretsNotPrinted(t, []string{pass, wrong}, []secretCase{
		{"url", withPass(pass), nil, true},
		{"env", withPass(""), []string{"PGPASSWORD=" + pass}, true},
		{"url-wrong", withPass(wrong), nil, false},
		{"env-wrong", withPass(""), []string{"PGPASSWORD=" + wrong}, false},
	}, []string{"PGPASSFILE=/nonexistent"}, func(t *testing.T) string { return e2eName(t, "pw") },
		"sh", "-c", `test -z "$PGPASSWORD"`)
}
