package e2e

// Black-box tests of leaderrun (through leaderrun-postgres) on a real
// PostgreSQL server. Tests that only add rows use the shared server of
// scripts/test.sh (LEADERRUN_TEST_POSTGRES_URL), each with its own lease
// names; tests that freeze or kill the server start a private one with
// scripts/postgres.sh and stop it by PID.

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

const pgE2EEnv = "LEADERRUN_TEST_POSTGRES_URL"

// pgE2EName is a lease name unique to this test and process.
func pgE2EName(t *testing.T, suffix string) string {
	return fmt.Sprintf("e2e-%s-%d-%s", strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), os.Getpid(), suffix)
}

// pgE2EShared returns the shared server's URL and the env selecting it.
func pgE2EShared(t *testing.T) (raw string, env []string) {
	raw = requireEnv(t, pgE2EEnv)
	return raw, []string{"LEADERRUN_STORE=" + raw}
}

// pgE2EPrivate starts a PostgreSQL server of its own for a test that freezes
// or kills it; it is stopped by PID at cleanup. It returns the URL and the
// postmaster's PID.
func pgE2EPrivate(t *testing.T) (raw string, pid int) {
	t.Helper()
	requireEnv(t, pgE2EEnv) // the same prerequisites as the shared server
	env := leasetest.StartServer(t, t.TempDir(), "scripts/postgres.sh")
	if env[pgE2EEnv] == "" {
		t.Fatalf("scripts/postgres.sh wrote no URL")
	}
	return env[pgE2EEnv], leasetest.ServerPID(t, env, "LEADERRUN_TEST_POSTGRES_PID")
}

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
		t.Fatalf("README.md:%d: the CREATE statements fail: %v", b.line, err)
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
	if a, b2 := columns(mine), columns(auto); a != b2 {
		t.Fatalf("README.md:%d: the README's table has columns %q; leaderrun creates %q", b.line, a, b2)
	}
}

// 20 instances started at once on one name, all waiting: every one runs,
// never two at a time, tokens strictly increase in run order.
func TestPostgresManyInstancesNoOverlap(t *testing.T) {
	t.Parallel()
	_, env := pgE2EShared(t)
	runCrowd(t, env, pgE2EName(t, "crowd"), 20, "sleep 0.02")
}

// --wait 0 against a held lease: exit 75, one line naming the holder, the
// child never starts.
func TestPostgresNoWaitConflict(t *testing.T) {
	t.Parallel()
	_, env := pgE2EShared(t)
	name := pgE2EName(t, "busy")
	leader, _ := holdLease(t, env, name, "--holder", "the-leader")
	marker := filepath.Join(t.TempDir(), "started")
	for i := 0; i < 3; i++ {
		code, stderr := runLR(t, env, "--wait", "0", "--name", name, "--", "touch", marker)
		if code != 75 {
			t.Fatalf("attempt %d: exit %d; want 75 (stderr: %s)", i, code, stderr)
		}
		if !strings.Contains(stderr, "the-leader") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("attempt %d: want one stderr line naming the holder, got %q", i, stderr)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a conflicting instance started its child")
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
}

// The server frozen (SIGSTOP to the postmaster and every backend) or killed
// under a running leader: the child gets the stop signal and is dead before
// last_sent + TTL, where last_sent is when the last renewal the server
// confirmed was sent; exit 124.
func TestPostgresServerFaultStopsChild(t *testing.T) {
	t.Parallel()
	t.Run("stop", func(t *testing.T) { t.Parallel(); pgE2EServerFault(t, syscall.SIGSTOP) })
	t.Run("kill", func(t *testing.T) { t.Parallel(); pgE2EServerFault(t, syscall.SIGKILL) })
}

func pgE2EServerFault(t *testing.T, sig syscall.Signal) {
	const ttl = 3 * time.Second
	raw, serverPID := pgE2EPrivate(t)
	if sig == syscall.SIGSTOP {
		t.Cleanup(func() { leasetest.SignalServer(t, serverPID, syscall.SIGCONT) })
	}
	got := filepath.Join(t.TempDir(), "got")
	script := fmt.Sprintf(`trap 'echo TERM >> %s; exit 0' TERM; echo "ready $$"; while :; do sleep 0.05; done`, got)
	p := start(t, []string{"LEADERRUN_STORE=" + raw},
		"-v", "--log-format", "json", "--name", "fault", "--ttl", ttl.String(),
		"--renew-every", "500ms", "--grace", "1s", "--", "sh", "-c", script)
	f := strings.Fields(p.line())
	if len(f) != 2 || f[0] != "ready" {
		t.Fatalf("child said %q", f)
	}
	child, _ := strconv.Atoi(f[1])
	waitStderr(t, p, `"event":"renewed"`, 5*time.Second)
	died := deathWatch(child)
	leasetest.SignalServer(t, serverPID, sig)
	faultAt := time.Now()
	if code := p.wait(); code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, p.stderr.String())
	}
	var death time.Time
	select {
	case death = <-died:
	case <-time.After(5 * time.Second):
		t.Fatalf("child %d still alive after leaderrun exited", child)
	}
	sent := renewalsSent(t, p)
	last := sent[len(sent)-1]
	if last.After(faultAt) {
		t.Fatalf("a renewal sent after the fault (%v > %v) was confirmed", last, faultAt)
	}
	margin := last.Add(ttl).Sub(death)
	t.Logf("MARGIN %s: child dead %v before last_sent+TTL (death %v after the fault)",
		unixSignalName(sig), margin.Round(time.Millisecond), death.Sub(faultAt).Round(time.Millisecond))
	if margin <= 0 {
		t.Fatalf("the child died %v AFTER the lease could have expired", -margin)
	}
	if b, _ := os.ReadFile(got); !strings.Contains(string(b), "TERM") {
		t.Fatalf("the child never got the stop signal (SIGTERM)")
	}
	if m := lastJSON(t, p); m["event"] != "lost" || m["exit_code"] != float64(124) {
		t.Fatalf("final line %v; want event lost, exit_code 124", m)
	}
}

// The row deleted by someone else under a running leader: the next renewal
// finds no row with our ID, the child is stopped within one renew interval
// (plus the stop), exit 124.
func TestPostgresRowDeletedStopsChild(t *testing.T) {
	t.Parallel()
	raw, env := pgE2EShared(t)
	const renew = 200 * time.Millisecond
	name := pgE2EName(t, "victim")
	p, child := holdLease(t, env, name, "--log-format", "json", "--renew-every", renew.String())
	t0 := time.Now()
	pgE2EExec(t, raw, "DELETE FROM leaderrun_leases WHERE name = $1", name)
	if code := p.wait(); code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, p.stderr.String())
	}
	took := time.Since(t0)
	waitGone(t, child, time.Second)
	if limit := renew + 500*time.Millisecond; took > limit {
		t.Fatalf("leaderrun took %v to stop the child; want ≤ %v (one renew interval + stop)", took, limit)
	}
	t.Logf("stopped and exited %v after the delete", took.Round(time.Millisecond))
	if m := lastJSON(t, p); m["event"] != "lost" || m["exit_code"] != float64(124) {
		t.Fatalf("final line %v; want event lost, exit_code 124", m)
	}
}

// A clean exit wakes a waiting instance through the release NOTIFY, not its
// sleep until the expiry (the default TTL, 15s): each of 5 tries well under a
// second. How fast (5–9ms p50 here) is BenchmarkPostgresHandover's to say:
// under the whole suite on 2 busy cores a try took up to 124ms.
func TestPostgresCleanHandover(t *testing.T) {
	t.Parallel()
	_, env := pgE2EShared(t)
	name := pgE2EName(t, "hand")
	var lat []time.Duration
	for i := 0; i < 5; i++ {
		leader, stdin := startStdin(t, env, "--name", name, "--", "sh", "-c", "echo ready; read x; exit 0")
		if l := leader.line(); l != "ready" {
			t.Fatalf("leader's child said %q", l)
		}
		waiter := start(t, env, "--name", name, "--wait", "60s", "--", "date", "+%s%N")
		waitStderr(t, waiter, "waiting", 30*time.Second)
		t0 := time.Now()
		stdin.Close()
		ns, err := strconv.ParseInt(waiter.line(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Unix(0, ns).Sub(t0)
		lat = append(lat, d)
		if c := leader.wait(); c != 0 {
			t.Fatalf("leader exit %d: %s", c, leader.stderr.String())
		}
		if c := waiter.wait(); c != 0 {
			t.Fatalf("waiter exit %d: %s", c, waiter.stderr.String())
		}
		if d > time.Second {
			t.Fatalf("try %d: handover took %v: the waiter was not woken by the NOTIFY", i, d)
		}
	}
	t.Logf("handover latencies %v", lat)
}

// leaderrun SIGKILLed: its child dies with it, and a waiting instance takes
// over within TTL + 1s of the kill (no release: the waiter sleeps until the
// expiry the server reports).
func TestPostgresLeaderKilledFailover(t *testing.T) {
	t.Parallel()
	_, env := pgE2EShared(t)
	const ttl = 2 * time.Second
	name := pgE2EName(t, "crash")
	leader, child := holdLease(t, env, name, "--ttl", ttl.String())
	waiter := start(t, env, "--name", name, "--ttl", ttl.String(), "--wait", "60s", "--", "date", "+%s%N")
	waitStderr(t, waiter, "waiting", 30*time.Second)
	t0 := time.Now()
	_ = leader.cmd.Process.Kill()
	leader.wait()
	waitGone(t, child, time.Second)
	ns, err := strconv.ParseInt(waiter.line(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Unix(0, ns).Sub(t0)
	t.Logf("takeover %v after the kill (%.3f × TTL)", took.Round(time.Millisecond), float64(took)/float64(ttl))
	if took > ttl+time.Second {
		t.Fatalf("takeover took %v; want ≤ TTL + 1s = %v", took, ttl+time.Second)
	}
	if c := waiter.wait(); c != 0 {
		t.Fatalf("waiter exit %d: %s", c, waiter.stderr.String())
	}
}

// 100 sequential runs: the fencing token ($LEADERRUN_TOKEN) strictly increases.
func TestPostgresTokensIncrease(t *testing.T) {
	t.Parallel()
	_, env := pgE2EShared(t)
	name := pgE2EName(t, "tok")
	var last uint64
	for i := 0; i < 100; i++ {
		cmd := exec.Command(lrBin, "-q", "--wait", "0", "--name", name, "--", "sh", "-c", `echo $LEADERRUN_TOKEN`)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		tok, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("run %d: token %q after %d; want strictly greater", i, out, last)
		}
		last = tok
	}
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
	check := func(t *testing.T, what, s string) {
		t.Helper()
		for _, sec := range []string{pass, wrong} {
			if strings.Contains(s, sec) {
				t.Fatalf("%s shows a password: %s", what, s)
			}
		}
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			for _, tc := range []struct {
				name, url string
				env       []string
				ok        bool
			}{
				{"url", withPass(pass), nil, true},
				{"env", withPass(""), []string{"PGPASSWORD=" + pass}, true},
				{"url-wrong", withPass(wrong), nil, false},
				{"env-wrong", withPass(""), []string{"PGPASSWORD=" + wrong}, false},
			} {
				env := append([]string{"LEADERRUN_STORE=" + tc.url, "PGPASSFILE=/nonexistent"}, tc.env...)
				code, stderr := runLR(t, env, "-v", "--log-format", format, "--name", pgE2EName(t, "pw"), "--", "sh", "-c", `test -z "$PGPASSWORD"`)
				check(t, tc.name+" run stderr", stderr)
				lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
				if tc.ok && code != 0 {
					t.Fatalf("%s: exit %d with the right password (or PGPASSWORD reached the child): %s", tc.name, code, stderr)
				}
				if !tc.ok && (code != 125 || len(lines) != 1) {
					t.Fatalf("%s: exit %d, %d lines with a wrong password; want 125 and one line: %s", tc.name, code, len(lines), stderr)
				}
				for _, args := range [][]string{{"status", "pw"}, {"status", "--json", "pw"}} {
					args = append([]string{"--log-format", format}, args...)
					cmd := exec.Command(lrBin, args...)
					cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
					var so, se lockedBuffer
					cmd.Stdout, cmd.Stderr = &so, &se
					err := cmd.Run()
					code := 0
					if ee, ok := err.(*exec.ExitError); ok {
						code = ee.ExitCode()
					}
					check(t, tc.name+" status", so.String()+se.String())
					if tc.ok && code != 3 || !tc.ok && code != 125 {
						t.Fatalf("%s %v: exit %d (stdout %q, stderr %q)", tc.name, args, code, so.String(), se.String())
					}
				}
			}
		})
	}
}
