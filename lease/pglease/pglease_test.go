package pglease_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/lease/pglease"
)

// EnvURL is the integration server's URL (scripts/postgres.sh writes it).
const EnvURL = "LEADERRUN_TEST_POSTGRES_URL"

// need returns the shared server's URL (see leasetest.RequireEnv).
func need(t *testing.T) string { return leasetest.RequireEnv(t, EnvURL) }

// private starts a PostgreSQL server for this test only (so it can be
// frozen or killed) and returns its URL and the postmaster's PID.
func private(t *testing.T) (string, int) {
	t.Helper()
	return leasetest.PrivateServer(t, "../../scripts/postgres.sh", EnvURL, "LEADERRUN_TEST_POSTGRES_PID", func() bool {
		if _, err := exec.LookPath("initdb"); err == nil {
			return true
		}
		m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		return len(m) > 0
	})
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withTable returns raw with ?table=NAME added.
func withTable(raw, table string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + "table=" + table
}

// freshTable is a table name no other test uses.
func freshTable(prefix string) string { return prefix + "_" + lease.NewID()[:10] }

func open(t *testing.T, raw string, o pglease.Options) *pglease.Store {
	t.Helper()
	s, err := pglease.Open(ctxT(t), raw, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// admin is a plain pgx connection, not the store: the "operator" that
// deletes rows and creates roles behind the store's back.
// sessions returns a function that counts the server's sessions whose
// application_name is app, as op sees them in pg_stat_activity.
func sessions(t *testing.T, op *pgx.Conn, app string) func() int {
	return func() int {
		var n int
		if err := op.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

func admin(t *testing.T, raw string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxT(t), raw)
	if err != nil {
		t.Fatalf("admin connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestConformance(t *testing.T) {
	op := admin(t, need(t))
	raw := withTable(need(t), freshTable("lr_conf")) // created by the racing first acquisitions
	table := raw[strings.LastIndex(raw, "table=")+len("table="):]
	leasetest.Run(t, leasetest.Harness{
		Open: leasetest.Opener(pglease.Open, raw, pglease.Options{CallTimeout: time.Second}),
		TTL:  300 * time.Millisecond,
		Break: func(t *testing.T, _ lease.Store, name string) {
			if _, err := op.Exec(ctxT(t), "DELETE FROM "+table+" WHERE name = $1", name); err != nil {
				t.Fatalf("DELETE: %v", err)
			}
		},
	})
}

// TestTokens100 checks that tokens strictly increase over 100 acquisitions
// by alternating stores, and that they stay below 2^53.
func TestTokens100(t *testing.T) {
	raw := need(t)
	leasetest.Tokens100(t, open(t, raw, pglease.Options{}), open(t, raw, pglease.Options{}), nil)
}

// TestRetrySameID: an acquire retried with the same ID (its answer was lost)
// gets the lease back with the same token; another ID is refused.
func TestRetrySameID(t *testing.T) {
	leasetest.RetrySameID(t, open(t, need(t), pglease.Options{}))
}

// TestWaitWakesOnNotify: with a long TTL, a waiter returns soon after the
// holder's release (the NOTIFY), not at the expiry.
func TestWaitWakesOnNotify(t *testing.T) {
	raw := need(t)
	a, b := open(t, raw, pglease.Options{}), open(t, raw, pglease.Options{})
	name := "notify-" + lease.NewID()[:8]
	la, err := a.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var he *lease.HeldError
	if _, err := b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: time.Minute}); !errors.As(err, &he) {
		t.Fatalf("second acquire: %v; want held", err)
	}
	// A first Wait sets up LISTEN; it sleeps until the expiry (a minute)
	// unless the release wakes it.
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctxT(t), name, he) }()
	// A Wait on another name must not be woken by this release.
	other := make(chan error, 1)
	octx, ocancel := context.WithCancel(ctxT(t))
	defer ocancel()
	lo, err := a.TryAcquire(ctxT(t), lease.Request{Name: name + "-other", Label: "a", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go func() { other <- b.Wait(octx, name+"-other", nil) }()
	if st, err := b.Status(ctxT(t), name); err != nil || st == nil || st.Remaining < 50*time.Second {
		t.Fatalf("Status = %+v, %v; want the holder with about a minute left", st, err)
	}
	released := time.Now()
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Wait did not return within 20s of the release (TTL 1m): no notification")
	}
	t.Logf("waiter woke %v after the release", time.Since(released))
	select {
	case err := <-other:
		t.Fatalf("Wait on another name returned %v at this release", err)
	default:
	}
	ocancel()
	if err := <-other; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on the other name: %v; want context.Canceled", err)
	}
	if err := lo.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestPasswordFromEnvAndPassfile: the URL without a password works with
// PGPASSWORD, and with PGPASSFILE (the ~/.pgpass format); a wrong password
// is ErrConfig and no message shows any password.
func TestPasswordFromEnvAndPassfile(t *testing.T) {
	raw := need(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	u.User = url.User(u.User.Username())
	bare := u.String()

	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("PGPASSWORD", pw)
	s := open(t, bare, pglease.Options{})
	if _, err := s.Status(ctxT(t), "x"); err != nil {
		t.Fatalf("with PGPASSWORD: %v", err)
	}

	t.Setenv("PGPASSWORD", "")
	pass := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(pass, []byte(fmt.Sprintf("%s:%s:*:%s:%s\n", u.Hostname(), u.Port(), u.User.Username(), pw)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSFILE", pass)
	s2 := open(t, bare, pglease.Options{})
	if _, err := s2.Status(ctxT(t), "x"); err != nil {
		t.Fatalf("with PGPASSFILE: %v", err)
	}
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	s3 := open(t, bare+"&passfile="+url.QueryEscape(pass), pglease.Options{})
	if _, err := s3.Status(ctxT(t), "x"); err != nil {
		t.Fatalf("with passfile=: %v", err)
	}

	wrong := "Wr0ngPassw0rdXYZ"
	t.Setenv("PGPASSWORD", wrong)
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	_, err = pglease.Open(ctxT(t), bare, pglease.Options{})
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("wrong PGPASSWORD: %v; want ErrConfig", err)
	}
	u.User = url.UserPassword(u.User.Username(), wrong)
	_, err2 := pglease.Open(ctxT(t), u.String(), pglease.Options{})
	if !errors.Is(err2, lease.ErrConfig) {
		t.Fatalf("wrong password in the URL: %v; want ErrConfig", err2)
	}
	for _, e := range []error{err, err2} {
		if m := e.Error(); strings.Contains(m, wrong) || strings.Contains(m, pw) {
			t.Fatalf("error shows a password: %q", m)
		}
	}
	t.Logf("wrong password: %v", err2)
}

// TestCreateRefused: a role that may not create tables gets a clear
// ErrConfig (naming the table and what to grant) on its first acquire, and
// works once an owner has created the table and granted it.
func TestCreateRefused(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	role, pw := "lr_plain_"+lease.NewID()[:8], "R0lePassw0rd"+lease.NewID()[:8]
	if _, err := op.Exec(ctxT(t), fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, pw)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = op.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = op.Exec(context.Background(), "DROP ROLE "+role)
	})
	u, _ := url.Parse(raw)
	u.User = url.UserPassword(role, pw)
	table := freshTable("lr_refused")
	s := open(t, withTable(u.String(), table), pglease.Options{})
	name := "refused-" + lease.NewID()[:8]
	_, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Second})
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "may not create") {
		t.Fatalf("acquire by a role without CREATE: %v; want ErrConfig naming table %s", err, table)
	}
	if strings.Contains(err.Error(), pw) {
		t.Fatalf("error shows the password: %v", err)
	}
	t.Logf("refused: %v", err)
	// Status of a table that does not exist: free, no error.
	if h, err := s.Status(ctxT(t), name); err != nil || h != nil {
		t.Fatalf("Status without the table = %+v, %v; want free", h, err)
	}
	// The owner creates it (as the README says) and grants the role.
	owner := open(t, withTable(raw, table), pglease.Options{})
	l, err := owner.TryAcquire(ctxT(t), lease.Request{Name: "setup", Label: "owner", ID: lease.NewID(), TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctxT(t))
	for _, g := range []string{
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s", table, role),
		fmt.Sprintf("GRANT USAGE ON SEQUENCE %s_token TO %s", table, role),
	} {
		if _, err := op.Exec(ctxT(t), g); err != nil {
			t.Fatal(err)
		}
	}
	l, err = s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 30 * time.Second})
	if err != nil {
		t.Fatalf("acquire after the grants: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestFrozenAndKilledServer: a renew against a SIGSTOPped server fails
// within the caller's deadline (ErrUnavailable), the lease survives the
// thaw, and a renew against a killed server fails within the deadline too.
func TestFrozenAndKilledServer(t *testing.T) {
	raw, pid := private(t)
	leasetest.FrozenAndKilled(t, open(t, raw, pglease.Options{CallTimeout: 5 * time.Second}), leasetest.Server{
		Freeze: func() { leasetest.SignalServer(t, pid, syscall.SIGSTOP) },
		Thaw:   func() { leasetest.SignalServer(t, pid, syscall.SIGCONT) },
		Kill:   func() { leasetest.SignalServer(t, pid, syscall.SIGKILL) },
		Secret: passwordOf(raw),
	})
}

func passwordOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	pw, _ := u.User.Password()
	return pw
}

// TestUnixSocket: the socket directory as a percent-encoded host and as
// ?host=, with the password from PGPASSWORD.
func TestUnixSocket(t *testing.T) {
	raw := need(t)
	dir := leasetest.RequireEnv(t, "LEADERRUN_TEST_POSTGRES_SOCKET")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	t.Setenv("PGPASSWORD", pw)
	user, port := u.User.Username(), u.Port()
	for _, raw := range []string{
		"postgres://" + user + "@" + url.PathEscape(dir) + ":" + port + "/postgres",
		"postgres:///postgres?host=" + url.QueryEscape(dir) + "&port=" + port + "&user=" + user,
	} {
		s := open(t, raw, pglease.Options{})
		l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "socket-" + lease.NewID()[:8], Label: "a", ID: lease.NewID(), TTL: 30 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenUnreachable: a server that is not there yet is not an Open error;
// calls report ErrUnavailable.
func TestOpenUnreachable(t *testing.T) {
	s := open(t, "postgres://u:S3cretPassw0rd@127.0.0.1:1/db?sslmode=disable", pglease.Options{CallTimeout: time.Second})
	_, err := s.Status(ctxT(t), "x")
	if !errors.Is(err, lease.ErrUnavailable) || strings.Contains(err.Error(), "S3cretPassw0rd") {
		t.Fatalf("Status against no server: %v; want ErrUnavailable without the password", err)
	}
}

// TestCommonWordPasswordKeepsMessages: a wrong password that is a common
// word is left out of messages structurally, never by replacing its text
// elsewhere: the server's words and ours stay whole.
func TestCommonWordPasswordKeepsMessages(t *testing.T) {
	u, err := url.Parse(need(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"pass", "PostgreSQL", "login", "reach"} {
		u.User = url.UserPassword(u.User.Username(), pw)
		_, err := pglease.Open(ctxT(t), u.String(), pglease.Options{CallTimeout: 5 * time.Second})
		if !errors.Is(err, lease.ErrConfig) {
			t.Fatalf("password %q: Open: %v; want ErrConfig", pw, err)
		}
		if msg := err.Error(); strings.Contains(msg, "xxxxx") || !strings.HasPrefix(msg, "PostgreSQL at "+u.Host+" refused the login: password authentication failed for user") {
			t.Errorf("password %q: message %q; want the words whole", pw, msg)
		}
		s := open(t, "postgres://u:"+pw+"@127.0.0.1:1/db?sslmode=disable", pglease.Options{CallTimeout: time.Second})
		_, err = s.Status(ctxT(t), "x")
		if want := "cannot reach PostgreSQL at 127.0.0.1:1: connection refused"; err == nil || err.Error() != want {
			t.Errorf("password %q: Status: %v; want %q", pw, err, want)
		}
	}
}

// TestConnections: a store uses one connection, a second one (LISTEN) only
// while it waits, and closes that once it holds the lease.
func TestConnections(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	app := "lr_conns_" + lease.NewID()[:8]
	count := sessions(t, op, app)
	// awaitCount polls pg_stat_activity (there is no event for another
	// session's start or end) until it shows want connections.
	awaitCount := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for n := count(); n != want; n = count() {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections of the store; want %d", n, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	a := open(t, raw, pglease.Options{})
	b := open(t, raw+"&application_name="+app, pglease.Options{})
	awaitCount(1)
	name := "conns-" + lease.NewID()[:8]
	la, err := a.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: time.Minute})
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("b: %v; want held", err)
	}
	// A waiting standby holds one connection: its LISTEN one (the query
	// connection is closed while it sleeps).
	listening := func() bool {
		var n int
		if err := op.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN %'", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctxT(t), name, he) }()
	deadline := time.Now().Add(10 * time.Second)
	for !(listening() && count() == 1) {
		if time.Now().After(deadline) {
			t.Fatalf("a waiting standby has %d connections (listening: %v); want its LISTEN one only", count(), listening())
		}
		time.Sleep(10 * time.Millisecond) // no event for another session's end
	}
	if err := la.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	awaitCount(1)
	if err := lb.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// With ?wait=poll a waiting standby holds no connection between its checks
// (for fleets of standbys, and poolers that cannot carry LISTEN), and still
// takes the lease once it is free: at the expiry the server reported.
func TestWaitPollHoldsNoConnection(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	app := "lr_poll_" + lease.NewID()[:8]
	count := sessions(t, op, app)
	a := open(t, raw, pglease.Options{})
	b := open(t, raw+"&wait=poll&application_name="+app, pglease.Options{})
	name := "poll-" + lease.NewID()[:8]
	if _, err := a.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	_, err := b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: 2 * time.Second})
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("b: %v; want held", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctxT(t), name, he) }()
	deadline := time.Now().Add(10 * time.Second)
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a polling standby holds %d connections while it waits; want none", count())
		}
		time.Sleep(10 * time.Millisecond) // no event for another session's end
	}
	// a never renews: the lease expires, and the poller's Wait returns then.
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: 2 * time.Second})
	if err != nil {
		t.Fatalf("after the expiry: %v", err)
	}
	_ = lb.Release(ctxT(t))
	if _, err := pglease.Open(ctxT(t), raw+"&wait=sometimes", pglease.Options{}); !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("wait=sometimes: %v; want a configuration error", err)
	}
}

// A standby lists the standbys when it joins, then sleeps until its turn:
// the listing closes the query connection when the store holds no lease,
// as a heartbeat does (30 standbys joining at once held 11-15 connections
// before). (Only a standby at the front that finds the lease free keeps it,
// for the attempt it makes next.)
func TestListingHoldsNoConnection(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	app := "lr_list_" + lease.NewID()[:8]
	count := sessions(t, op, app)
	s := open(t, raw+"&wait=poll&application_name="+app, pglease.Options{})
	name := "list-" + lease.NewID()[:8]
	h := open(t, raw, pglease.Options{})
	lh, err := h.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "h", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lh.Release(ctxT(t)) }()
	c := lease.Candidate{ID: lease.NewID(), Label: "s", Since: time.Now()}
	if _, err := s.Join(ctxT(t), name, c, time.Minute); err != nil {
		t.Fatal(err)
	}
	if cs, _, err := s.Candidates(ctxT(t), name); err != nil || len(cs) != 1 {
		t.Fatalf("Candidates = %v, %v; want the one standby", cs, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after its listing a standby holds %d connections; want none", count())
		}
		time.Sleep(10 * time.Millisecond) // no event for another session's end
	}
}

// A server that ends idle sessions (idle_session_timeout, SQLSTATE 57P05)
// costs a reconnect, never an error: the next renew, acquire and release
// each run on a new connection, as after 57P01.
func TestIdleSessionTimeout(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	role, pw := "lr_idle_"+lease.NewID()[:8], "IdlePassw0rd"+lease.NewID()[:8]
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, pw),
		fmt.Sprintf("ALTER ROLE %s SET idle_session_timeout = '100ms'", role),
	} {
		if _, err := op.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = op.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = op.Exec(context.Background(), "DROP ROLE "+role)
	})
	table := freshTable("lr_idle")
	owner := open(t, withTable(raw, table), pglease.Options{})
	setup, err := owner.TryAcquire(ctxT(t), lease.Request{Name: "setup", Label: "owner", ID: lease.NewID(), TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = setup.Release(ctxT(t))
	for _, g := range []string{
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s", table, role),
		fmt.Sprintf("GRANT USAGE ON SEQUENCE %s_token TO %s", table, role),
	} {
		if _, err := op.Exec(ctxT(t), g); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := url.Parse(raw)
	u.User = url.UserPassword(role, pw)
	s := open(t, withTable(u.String(), table), pglease.Options{})
	// idled waits until the server has ended every session of the role: the
	// event the test is about (pg_stat_activity shows it).
	idled := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var n int
			if err := op.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the role's %d sessions still live after 30s", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	name := "idle-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	idled()
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatalf("renew after the server ended the idle session: %v", err)
	}
	idled()
	if _, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: 5 * time.Second}); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquire after an idle close: %v; want ErrHeld", err)
	}
	idled()
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("release after the server ended the idle session: %v", err)
	}
}

// A sequence set past what tokens may reach (2^53) refuses the acquisition,
// and leaves no row behind: the lease stays free, not blocked for the TTL.
func TestSequencePastMaxLeavesNoRow(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	table := freshTable("lr_seqmax")
	s := open(t, withTable(raw, table), pglease.Options{})
	name := "seqmax-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Exec(ctxT(t), fmt.Sprintf("SELECT setval('%s_token', 9223372036854775806)", table)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Minute}); err == nil || !strings.Contains(err.Error(), "bad fencing token") {
		t.Fatalf("acquire with the sequence at 2^63-2: %v; want it refused", err)
	}
	if h, err := s.Status(ctxT(t), name); err != nil || h != nil {
		t.Fatalf("status after the refused acquisition: %+v, %v; want free", h, err)
	}
	// A minute within the bound the sequence is followed, and the grant
	// is the server's clock, not the token's (--once-per decides on it).
	near := time.Now().Add(lease.MaxClockSkew - time.Minute).UnixMicro()
	if _, err := op.Exec(ctxT(t), fmt.Sprintf("SELECT setval('%s_token', %d)", table, near)); err != nil {
		t.Fatal(err)
	}
	l, err = s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatalf("acquire with the sequence a minute within the bound: %v", err)
	}
	defer l.Release(ctxT(t))
	leasetest.CheckGranted(t, l.Info(), 30*time.Second)
}

// The standbys' registry passes the same checks as every other store's;
// its table is created by the first Join.
func TestConformanceCandidates(t *testing.T) {
	raw := withTable(need(t), freshTable("lr_cand"))
	leasetest.RunCandidates(t, leasetest.Harness{
		Open: leasetest.Opener(pglease.Open, raw, pglease.Options{CallTimeout: time.Second}),
		TTL:  300 * time.Millisecond,
	})
}

// Waiting stores LISTEN only while the server keeps room: here the role's
// CONNECTION LIMIT of 12 and a waiter on each of 12 leases, all at the
// front of their lines. A LISTEN connection is kept only while a quarter
// of the role's connections (3) stay free, so the role still connects
// (before, the waiters took every connection the role had and the rest
// retried against "too many connections" every few seconds), and every
// waiter still gets its lease: by the NOTIFY, or at the expiry.
func TestListenLeavesRoom(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	const limit, waiters = 12, 12
	role, plain := limitedRole(t, op, raw, "lr_room_", limit)
	asRole := withTable(plain, freshTable("lr_room"))
	held := func() (all, listening int) {
		if err := op.QueryRow(ctxT(t), "SELECT count(*), count(*) FILTER (WHERE query ILIKE 'LISTEN %' AND state = 'idle') FROM pg_stat_activity WHERE usename = $1", role).Scan(&all, &listening); err != nil {
			t.Fatal(err)
		}
		return all, listening
	}

	h := open(t, asRole, pglease.Options{})
	prefix := "room-" + lease.NewID()[:8] + "-"
	var leases []lease.Lease
	for i := range waiters {
		l, err := h.TryAcquire(ctxT(t), lease.Request{Name: fmt.Sprint(prefix, i), Label: "h", ID: lease.NewID(), TTL: 8 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	// The holder renews, as a holder does: on a loaded machine the waiters'
	// set-up and the samples below can outlast any TTL held unrenewed.
	stopRenewing := renewing(t, leases, 2*time.Second)
	done := make(chan error, waiters)
	for i := range waiters {
		w := open(t, asRole, pglease.Options{})
		_, err := w.TryAcquire(ctxT(t), lease.Request{Name: fmt.Sprint(prefix, i), Label: "w", ID: lease.NewID(), TTL: 8 * time.Second})
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Fatalf("waiter %d: %v; want held", i, err)
		}
		go func() { done <- w.Wait(ctxT(t), fmt.Sprint(prefix, i), he) }()
	}
	// Some LISTEN, the rest are refused (and then pause for seconds): a
	// few seconds of samples see what the waiters keep.
	most, mostListening, connected, tries := 0, 0, 0, 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); tries++ {
		all, listening := held()
		most, mostListening = max(most, all), max(mostListening, listening)
		if c, err := pgx.Connect(ctxT(t), plain); err == nil {
			connected++
			_ = c.Close(context.Background())
		} else {
			t.Logf("the role could not connect: %v", err)
		}
	}
	t.Logf("%d waiters under a role limit of %d: up to %d of the role's sessions (%d LISTENing); the role connected %d of %d times", waiters, limit, most, mostListening, connected, tries)
	if connected != tries || mostListening > limit-3-1 || mostListening == 0 {
		t.Fatalf("up to %d LISTEN connections, the role connected %d of %d times; want 1 to %d LISTEN connections (a quarter of the limit free, besides the holder's) and a connection every time",
			mostListening, connected, tries, limit-3-1)
	}
	stopRenewing()
	for _, l := range leases {
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	for range waiters {
		if err := <-done; err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
}

// A server that refuses a store's query connection as too many (SQLSTATE
// 53300) makes the store give up its LISTEN connection at once: a waiting
// standby's LISTEN connection must never be what keeps another from the
// connection it needs to take the lease. Here the role's connections are
// all taken (its CONNECTION LIMIT), the waiter's check is refused, and the
// slot its LISTEN connection held is free again.
func TestListenYieldsToTooManyConnections(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	const limit = 16
	role, plain := limitedRole(t, op, raw, "lr_full_", limit)
	asRole := withTable(plain, freshTable("lr_full"))
	listening := func() int {
		var n int
		if err := op.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND query ILIKE 'LISTEN %' AND state = 'idle'", role).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	h, w := open(t, asRole, pglease.Options{}), open(t, asRole, pglease.Options{})
	name := "full-" + lease.NewID()[:8]
	l, err := h.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "h", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "w", ID: lease.NewID(), TTL: time.Minute})
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("w: %v; want held", err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait(ctxT(t), name, he) }()
	deadline := time.Now().Add(10 * time.Second)
	for listening() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not LISTEN")
		}
		time.Sleep(10 * time.Millisecond) // no event for another session's start
	}
	// Take every connection the role has left.
	var fill []*pgx.Conn
	defer func() {
		for _, c := range fill {
			_ = c.Close(context.Background())
		}
	}()
	for {
		c, err := pgx.Connect(ctxT(t), plain)
		if err != nil {
			if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "53300" {
				t.Fatalf("filling the role's connections: %v", err)
			}
			break
		}
		fill = append(fill, c)
	}
	if _, err := w.Status(ctxT(t), name); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Status with the role's connections all taken: %v; want ErrUnavailable", err)
	}
	// The waiter's LISTEN connection goes: its slot can be had.
	for {
		c, err := pgx.Connect(ctxT(t), plain)
		if err == nil {
			fill = append(fill, c)
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("the waiter's LISTEN connection was not given up: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // no event for another session's end
	}
	if n := listening(); n != 0 {
		t.Fatalf("%d LISTEN connections after the server refused one as too many; want 0", n)
	}
	// The dropped LISTEN wakes the Wait to check again, as any drop does.
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	_ = l.Release(ctxT(t))
}

// A standby at the front of the line that lists and finds the lease free
// tries next: its attempt runs on the connection of the listing, not on a
// new one (each connect and login cost 220-425 ms of a 500 ms call timeout
// under contention on 2 busy cores, and attempts ran out of time).
func TestFrontListingKeepsConnectionForAttempt(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	app := "lr_front_" + lease.NewID()[:8]
	s := open(t, raw+"&application_name="+app, pglease.Options{})
	name := "front-" + lease.NewID()[:8]
	backend := func() int {
		var pid int
		if err := op.QueryRow(ctxT(t), "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE application_name = $1 AND query NOT ILIKE 'LISTEN %'", app).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	c := lease.Candidate{ID: lease.NewID(), Label: "s", Since: time.Now()}
	if _, err := s.Join(ctxT(t), name, c, time.Minute); err != nil {
		t.Fatal(err)
	}
	if cs, h, err := s.Candidates(ctxT(t), name); err != nil || len(cs) != 1 || h != nil {
		t.Fatalf("Candidates = %v, %v, %v; want the one standby and a free lease", cs, h, err)
	}
	listed := backend()
	if listed == 0 {
		t.Fatal("the front standby closed its connection after finding the lease free")
	}
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "s", ID: c.ID, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctxT(t)) }()
	if got := backend(); got != listed {
		t.Fatalf("the attempt ran on backend %d, the listing on %d: a new connection", got, listed)
	}
}

// limitedRole makes a login role named prefix plus a random part, allowed
// limit connections and to create tables, and returns its name and the URL
// raw with that role's credentials.
func limitedRole(t *testing.T, op *pgx.Conn, raw, prefix string, limit int) (role, plain string) {
	t.Helper()
	role = prefix + strings.ToLower(lease.NewID()[:8])
	const password = "l1mitedPassw0rd"
	for _, sql := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT %d PASSWORD '%s'", role, limit, password),
		"GRANT CREATE ON SCHEMA public TO " + role,
	} {
		if _, err := op.Exec(ctxT(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	return role, u.String()
}

// A sequence set more than lease.MaxClockSkew ahead of the server's clock
// (30 days) refuses the acquisition with ErrTokenAhead, in one line naming
// the sequence, and leaves no row behind. (It was followed: --once-per then
// decided periods 30 days ahead and the runs were left out of the history.)
func TestSequenceAheadOfClockRefused(t *testing.T) {
	raw := need(t)
	op := admin(t, raw)
	table := freshTable("lr_seqahead")
	s := open(t, withTable(raw, table), pglease.Options{})
	name := "seqahead-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(30 * 24 * time.Hour).UnixMicro()
	if _, err := op.Exec(ctxT(t), fmt.Sprintf("SELECT setval('%s_token', %d)", table, ahead)); err != nil {
		t.Fatal(err)
	}
	_, err = s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: time.Minute})
	if !errors.Is(err, lease.ErrTokenAhead) || !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), table+"_token") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("acquire with the sequence 30 days ahead: %v; want one line, ErrTokenAhead, naming the sequence", err)
	}
	if h, err := s.Status(ctxT(t), name); err != nil || h != nil {
		t.Fatalf("status after the refused acquisition: %+v, %v; want free", h, err)
	}
}

// A login slower than the call timeout (a loaded server) is a wait, not a
// failure: Acquire sets the connection up within its wait (Connect), and
// the renewals use the connection it made, within the call timeout. Before
// the set-up had a budget of its own, every attempt's login was cut short
// at the call timeout and the wait ended with the store "unavailable".
func TestSlowLoginIsAWait(t *testing.T) {
	raw := need(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	const callTimeout = 150 * time.Millisecond
	addr, accepted := leasetest.SlowSetup(t, u.Host, 4*callTimeout)
	u.Host = addr
	s := open(t, withTable(u.String(), freshTable("slowlogin")), pglease.Options{CallTimeout: callTimeout})
	ctx := ctxT(t)
	a, err := lease.Acquire(ctx, s, lease.Request{Name: "slow-login", Label: "me", TTL: 10 * time.Second},
		lease.AcquireOptions{Wait: 10 * time.Second, CallTimeout: callTimeout})
	if err != nil {
		t.Fatalf("Acquire with a login 4 times the call timeout: %v (%d connections)", err, accepted.Load())
	}
	before := accepted.Load()
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := a.Lease.Renew(rctx); err != nil {
		t.Fatalf("Renew on the connection Acquire set up: %v", err)
	}
	if n := accepted.Load(); n != before {
		t.Fatalf("Renew made %d new connections; want it to use the one set up", n-before)
	}
	if err := a.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// renewing renews leases every interval until the returned function is
// called (it waits for the renewals to stop); a renewal that fails fails
// the test.
func renewing(t *testing.T, leases []lease.Lease, every time.Duration) func() {
	t.Helper()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, l := range leases {
				ctx, cancel := context.WithTimeout(context.Background(), every)
				if err := l.Renew(ctx); err != nil {
					t.Errorf("renew %s: %v", l.Info().Name, err)
				}
				cancel()
			}
		}
	}()
	var once sync.Once
	halt := func() {
		once.Do(func() { close(stop) })
		<-stopped
	}
	t.Cleanup(halt)
	return halt
}
