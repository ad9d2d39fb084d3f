package mysqllease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/lease/mysqllease"
)

// EnvURL is the integration server's URL (scripts/mariadb.sh writes it).
const EnvURL = "LEADERRUN_TEST_MYSQL_URL"

// need returns the shared server's URL (see leasetest.RequireEnv).
func need(t *testing.T) string { return leasetest.RequireEnv(t, EnvURL) }

// private starts a MariaDB server for this test only (so it can be frozen
// or killed) and returns its URL and mariadbd's PID.
func private(t *testing.T) (string, int) {
	t.Helper()
	return leasetest.PrivateServer(t, "../../scripts/mariadb.sh", EnvURL, "LEADERRUN_TEST_MYSQL_PID", func() bool {
		if _, err := exec.LookPath("mariadbd"); err == nil {
			return true
		}
		_, err := os.Stat("/usr/sbin/mariadbd")
		return err == nil
	})
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withParam returns raw with ?k=v added.
func withParam(raw, k, v string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + k + "=" + url.QueryEscape(v)
}

// freshTable is a table name no other test uses.
func freshTable(prefix string) string { return prefix + "_" + lease.NewID()[:10] }

func open(t *testing.T, raw string, o mysqllease.Options) *mysqllease.Store {
	t.Helper()
	s, err := mysqllease.Open(ctxT(t), raw, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// admin is a plain connection, not the store: the "operator" that deletes
// rows and creates users behind the store's back.
func admin(t *testing.T, raw string) *sql.DB { return leasetest.MySQLOperator(t, raw) }

func TestConformance(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	table := freshTable("lr_conf")
	raw = withParam(raw, "table", table) // created by the racing first acquisitions
	leasetest.Run(t, leasetest.Harness{
		Open: leasetest.Opener(mysqllease.Open, raw, mysqllease.Options{CallTimeout: time.Second}),
		TTL:  300 * time.Millisecond,
		Break: func(t *testing.T, _ lease.Store, name string) {
			if _, err := op.ExecContext(ctxT(t), "DELETE FROM "+table+" WHERE name = ?", name); err != nil {
				t.Fatalf("DELETE: %v", err)
			}
		},
	})
}

// The standbys' registry passes the same checks as every other store's;
// its table is created by the first Join.
func TestConformanceCandidates(t *testing.T) {
	raw := withParam(need(t), "table", freshTable("lr_cand"))
	leasetest.RunCandidates(t, leasetest.Harness{
		Open: leasetest.Opener(mysqllease.Open, raw, mysqllease.Options{CallTimeout: time.Second}),
		TTL:  300 * time.Millisecond,
	})
}

// TestTokens100 checks that tokens strictly increase over 100 acquisitions
// by alternating stores, also after the rows (the lease's and its
// counter's) are deleted by hand, and that they stay below 2^53.
func TestTokens100(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	a, b := open(t, raw, mysqllease.Options{}), open(t, raw, mysqllease.Options{})
	leasetest.Tokens100(t, a, b, func(i int, name string) {
		if i != 50 {
			return
		}
		if _, err := op.ExecContext(ctxT(t), "DELETE FROM leaderrun_leases WHERE name IN (?, ?)", name, name+"~"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRetrySameID: an acquire retried with the same ID (its answer was lost)
// gets the lease back with the same token; another ID is refused.
func TestRetrySameID(t *testing.T) {
	leasetest.RetrySameID(t, open(t, need(t), mysqllease.Options{}))
}

// TestTokenPastMaxLeavesNoRow: a counter row set past 2^53 by hand makes
// the acquisition fail with a message, and takes the row out again.
func TestTokenPastMaxLeavesNoRow(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	s := open(t, raw, mysqllease.Options{})
	name := "pastmax-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := op.ExecContext(ctxT(t), "UPDATE leaderrun_leases SET token = ? WHERE name = ?", int64(1)<<53, name+"~"); err != nil {
		t.Fatal(err)
	}
	_, err = s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "bad fencing token") {
		t.Fatalf("acquire past 2^53: %v; want a bad fencing token", err)
	}
	if h, err := s.Status(ctxT(t), name); err != nil || h != nil {
		t.Fatalf("status after the refused acquisition: %+v, %v; want free", h, err)
	}
}

// TestCounterAheadOfClock: a counter row set more than lease.MaxClockSkew
// ahead of the server's clock (30 days, by hand or a clock that stepped
// back) refuses the acquisition with ErrTokenAhead (and ErrConfig: exit
// 125), in one line naming the row, and takes the lease row out again;
// a minute within the bound it is followed, and the grant is the server's
// clock, not the token's (--once-per decides on it). (The counter was
// followed whatever its lead: its runs were then left out of the history
// as from the future.)
func TestCounterAheadOfClock(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	s := open(t, raw, mysqllease.Options{})
	name := "ahead-" + lease.NewID()[:8]
	set := func(ahead time.Duration) {
		t.Helper()
		if _, err := op.ExecContext(ctxT(t), "INSERT INTO leaderrun_leases (name, holder, id, token, since, ttl_ms, expires) VALUES (?, '', '', ?, NOW(6), 0, '1970-01-01 00:00:00') ON DUPLICATE KEY UPDATE token = VALUES(token)",
			name+"~", time.Now().Add(ahead).UnixMicro()); err != nil {
			t.Fatal(err)
		}
	}
	// The table exists once the store has acquired something.
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "ahead-init-" + lease.NewID()[:8], Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctxT(t))
	set(30 * 24 * time.Hour)
	_, err = s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if !errors.Is(err, lease.ErrTokenAhead) || !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), name+"~") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("acquire with the counter 30 days ahead: %v; want one line, ErrTokenAhead, naming the counter row", err)
	}
	if h, err := s.Status(ctxT(t), name); err != nil || h != nil {
		t.Fatalf("status after the refused acquisition: %+v, %v; want free", h, err)
	}
	set(lease.MaxClockSkew - time.Minute)
	l, err = s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("acquire with the counter a minute within the bound: %v", err)
	}
	defer l.Release(ctxT(t))
	leasetest.CheckGranted(t, l.Info(), 30*time.Second)
}

// restrictedUser creates a user (dropped at cleanup) with the grants given
// on the test database (and the per-account connection limit, 0: none),
// and returns the URL that logs in as it.
func restrictedUser(t *testing.T, op *sql.DB, raw, grants string, limit int) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	user := "lr_" + lease.NewID()[:10]
	pass := "pw" + lease.NewID()[:16]
	db := strings.TrimPrefix(u.Path, "/")
	for _, stmt := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS %d", user, pass, limit),
		fmt.Sprintf("GRANT %s ON `%s`.* TO '%s'@'%%'", grants, db, user),
	} {
		if _, err := op.ExecContext(ctxT(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() { _, _ = op.ExecContext(context.Background(), fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	v := *u
	v.User = url.UserPassword(user, pass)
	return v.String()
}

// TestCreateRefused: a user that may not create tables gets one line,
// ErrConfig, naming the missing privilege and what to do; once the tables
// exist it works with SELECT, INSERT, UPDATE and DELETE alone.
func TestCreateRefused(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	table := freshTable("lr_ro")
	asUser := withParam(restrictedUser(t, op, raw, "SELECT, INSERT, UPDATE, DELETE", 0), "table", table)
	s := open(t, asUser, mysqllease.Options{})
	req := lease.Request{Name: "ro", Label: "a", ID: lease.NewID(), TTL: 5 * time.Second}
	_, err := s.TryAcquire(ctxT(t), req)
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "may not create") || !strings.Contains(err.Error(), "CREATE command denied") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("acquire as a user without CREATE: %v; want one line of ErrConfig naming the privilege", err)
	}
	// The tables made by a user that may (the store, as the admin).
	sa := open(t, withParam(raw, "table", table), mysqllease.Options{})
	l, err := sa.TryAcquire(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	req.ID = lease.NewID()
	l, err = s.TryAcquire(ctxT(t), req)
	if err != nil {
		t.Fatalf("acquire as a user with SELECT, INSERT, UPDATE, DELETE: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestLoginRefused: a wrong password or a missing database is ErrConfig
// from Open, one line, without the password.
func TestLoginRefused(t *testing.T) {
	raw := need(t)
	u, _ := url.Parse(raw)
	const wrong = "Wr0ngS3cretPW"
	bad := *u
	bad.User = url.UserPassword(u.User.Username(), wrong)
	nodb := *u
	nodb.Path = "/no_such_db"
	for _, tc := range []struct{ raw, want string }{
		{bad.String(), "refused the login"},
		{nodb.String(), "name an existing database"},
	} {
		_, err := mysqllease.Open(ctxT(t), tc.raw, mysqllease.Options{})
		pass, _ := u.User.Password()
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open: %v; want one line of ErrConfig saying %q, no password", err, tc.want)
		}
	}
}

// TestUnixSocket: ?socket= reaches the server through its Unix socket.
func TestUnixSocket(t *testing.T) {
	raw := need(t)
	sock := leasetest.RequireEnv(t, "LEADERRUN_TEST_MYSQL_SOCKET")
	u, _ := url.Parse(raw)
	v := *u
	v.Host = ""
	s := open(t, withParam(v.String(), "socket", sock), mysqllease.Options{})
	if !strings.Contains(s.String(), "socket=") {
		t.Fatalf("String() = %q; want the socket", s.String())
	}
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "sock-" + lease.NewID()[:8], Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestTLSWithoutServerTLS: tls=true against a server that offers no TLS
// is a configuration error (never a silent plain connection); preferred
// connects in plain text.
func TestTLSWithoutServerTLS(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	var have string
	if err := op.QueryRowContext(ctxT(t), "SELECT @@have_ssl").Scan(&have); err != nil || have == "YES" {
		t.Skipf("the server offers TLS (have_ssl %q, %v)", have, err)
	}
	_, err := mysqllease.Open(ctxT(t), withParam(raw, "tls", "true"), mysqllease.Options{})
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "does not offer TLS") {
		t.Fatalf("tls=true: %v; want ErrConfig saying the server does not offer TLS", err)
	}
	s := open(t, withParam(raw, "tls", "preferred"), mysqllease.Options{})
	if _, err := s.Status(ctxT(t), "x"); err != nil {
		t.Fatalf("tls=preferred: %v", err)
	}
}

// TestTooManyConnectionsIsUnavailable: an account at its connection limit
// (error 1226 on MariaDB; 1203 for the global max_user_connections) is an
// outage a waiter rides out (ErrUnavailable), not a configuration error.
func TestTooManyConnectionsIsUnavailable(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	asUser := restrictedUser(t, op, raw, "ALL", 1)
	s := open(t, asUser, mysqllease.Options{}) // holds the one connection
	if _, err := s.Status(ctxT(t), "x"); err != nil {
		t.Fatal(err)
	}
	s2, err := mysqllease.Open(ctxT(t), asUser, mysqllease.Options{})
	if err != nil {
		t.Fatalf("Open over the limit: %v; want the store, its calls unavailable", err)
	}
	defer s2.Close()
	_, err = s2.Status(ctxT(t), "x")
	if !errors.Is(err, lease.ErrUnavailable) || errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "no connection to spare") {
		t.Fatalf("a call over the limit: %v; want ErrUnavailable saying so", err)
	}
}

// TestWaiterConnections: a waiter at the front of the line keeps its one
// connection between its reads while its account has room; with an
// account limit of 3 (a quarter, at least 3, must stay free) it keeps
// none, and reads on a connection made for the read.
func TestWaiterConnections(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	for _, tc := range []struct {
		limit int
		want  int // connections between reads
	}{{0, 1}, {3, 0}} {
		t.Run(fmt.Sprint("limit", tc.limit), func(t *testing.T) {
			asUser := restrictedUser(t, op, raw, "ALL", tc.limit)
			user, _ := url.Parse(asUser)
			holder := open(t, raw, mysqllease.Options{})
			name := "conns-" + lease.NewID()[:8]
			l, err := holder.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "h", ID: lease.NewID(), TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.Background())
			w := open(t, withParam(asUser, "poll", "100ms"), mysqllease.Options{})
			var he *lease.HeldError
			if _, err := w.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "w", ID: lease.NewID(), TTL: time.Minute}); !errors.As(err, &he) {
				t.Fatalf("waiter's attempt: %v", err)
			}
			ctx, cancel := context.WithCancel(ctxT(t))
			done := make(chan error, 1)
			go func() { done <- w.Wait(ctx, name, he) }()
			count := func() int {
				var n int
				if err := op.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", user.User.Username()).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			// Samples over a second of waiting (ten polls with room): with
			// room the connection is there at every one; without, a read's
			// connection lives a few ms every 2 s, so nearly never.
			seen := map[int]int{}
			for range 20 {
				time.Sleep(50 * time.Millisecond) // sampling a steady state, not awaiting an event
				seen[count()]++
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait: %v", err)
			}
			if seen[tc.want] < 18 {
				t.Fatalf("connections of the waiting account sampled %v; want %d nearly always", seen, tc.want)
			}
		})
	}
}

// TestFrozenAndKilledServer: a renew against a SIGSTOPped server fails
// within the caller's deadline (ErrUnavailable), the lease survives the
// thaw, and a renew against a killed server fails within the deadline too.
func TestFrozenAndKilledServer(t *testing.T) {
	raw, pid := private(t)
	u, _ := url.Parse(raw)
	pass, _ := u.User.Password()
	leasetest.FrozenAndKilled(t, open(t, raw, mysqllease.Options{CallTimeout: 5 * time.Second}), leasetest.Server{
		Freeze: func() { leasetest.Freeze(t, pid) },
		Thaw:   func() { leasetest.Thaw(t, pid) },
		Kill: func() {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
		Secret: pass,
	})
}

// TestTLS, on a server of its own with TLS, as a user the server lets in
// over TLS only (REQUIRE SSL): tls=true with the CA file verifies the
// server and gets in; without the CA the server's certificate is refused
// (ErrConfig, one line); skip-verify and preferred get in without
// verifying; without tls= the server refuses the login.
func TestTLS(t *testing.T) {
	certs := t.TempDir()
	ca := leasetest.WriteCerts(t, certs)
	env := leasetest.StartServer(t, t.TempDir(), "../../scripts/mariadb.sh", "200", certs)
	raw := env[EnvURL]
	if raw == "" {
		t.Fatal("mariadb.sh wrote no URL")
	}
	op := admin(t, raw)
	asUser := restrictedUser(t, op, raw, "ALL", 0)
	user, _ := url.Parse(asUser)
	if _, err := op.ExecContext(ctxT(t), fmt.Sprintf("ALTER USER '%s'@'%%' REQUIRE SSL", user.User.Username())); err != nil {
		t.Fatal(err)
	}
	s := open(t, withParam(withParam(asUser, "tls", "true"), "ca", ca), mysqllease.Options{})
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "tls", Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("acquire over verified TLS: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	_, err = mysqllease.Open(ctxT(t), withParam(asUser, "tls", "true"), mysqllease.Options{})
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "cannot verify") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("tls=true without the CA: %v; want one line of ErrConfig saying the server cannot be verified", err)
	}
	for _, mode := range []string{"skip-verify", "preferred"} {
		s := open(t, withParam(asUser, "tls", mode), mysqllease.Options{})
		if _, err := s.Status(ctxT(t), "tls"); err != nil {
			t.Fatalf("tls=%s: %v", mode, err)
		}
	}
	if _, err := mysqllease.Open(ctxT(t), asUser, mysqllease.Options{}); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "refused the login") {
		t.Fatalf("no TLS as a user that requires it: %v; want the login refused", err)
	}
}
