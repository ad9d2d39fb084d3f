package pglease

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/internal/safefile"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"golang.org/x/sys/unix"
)

func TestParseURL(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "/nonexistent")
	cases := []struct {
		raw, display, table, user, db, host string
		port                                uint16
	}{
		{"postgres://app:S3cretPassw0rd@db.example:6432/jobs?sslmode=disable", "postgres://app@db.example:6432/jobs", "leaderrun_leases", "app", "jobs", "db.example", 6432},
		{"postgresql://app@127.0.0.1/jobs?table=ops.leases&sslmode=disable", "postgresql://app@127.0.0.1:5432/jobs?table=ops.leases", "ops.leases", "app", "jobs", "127.0.0.1", 5432},
		{"POSTGRES://app@[::1]:5433/x?table=my_leases", "postgres://app@[::1]:5433/x?table=my_leases", "my_leases", "app", "x", "::1", 5433},
		{"postgres://app@%2Fvar%2Frun%2Fpostgresql/jobs", "postgres://app@/jobs?host=%2Fvar%2Frun%2Fpostgresql&port=5432", "leaderrun_leases", "app", "jobs", "/var/run/postgresql", 5432},
		{"postgres://app@%2Ftmp%2Fpg:7777/jobs", "postgres://app@/jobs?host=%2Ftmp%2Fpg&port=7777", "leaderrun_leases", "app", "jobs", "/tmp/pg", 7777},
		{"postgres:///jobs?host=/tmp/pg&user=app&port=7777", "postgres://app@/jobs?host=%2Ftmp%2Fpg&port=7777", "leaderrun_leases", "app", "jobs", "/tmp/pg", 7777},
	}
	for _, tc := range cases {
		c, err := parseURL(tc.raw, noEnv)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tc.raw, err)
			continue
		}
		if c.display != tc.display || c.tableS != tc.table || c.conn.User != tc.user || c.conn.Database != tc.db || c.conn.Host != tc.host || c.conn.Port != tc.port {
			t.Errorf("parseURL(%q) = display %q table %q user %q db %q host %q port %d; want %q %q %q %q %q %d",
				tc.raw, c.display, c.tableS, c.conn.User, c.conn.Database, c.conn.Host, c.conn.Port,
				tc.display, tc.table, tc.user, tc.db, tc.host, tc.port)
		}
		if _, ok := c.conn.RuntimeParams[TableParam]; ok {
			t.Errorf("parseURL(%q): table= reached pgx as a runtime parameter", tc.raw)
		}
	}
	if c, err := parseURL("postgres://app:S3cretPassw0rd@h/db", noEnv); err != nil || !slices.Contains(c.secrets, "S3cretPassw0rd") || c.conn.Password != "S3cretPassw0rd" {
		t.Fatalf("password not taken or not kept secret: %v", err)
	}
}

// noEnv is a getenv with nothing set.
func noEnv(string) string { return "" }

// A password holding '@' (unencoded) splits at the last '@', as on Redis and
// etcd: pgx gets the password and the host, and no message holds a piece of
// the password (it once said "cannot reach PostgreSQL at ssW0rd@db…").
// sslpassword= is a secret too.
func TestParseURLPasswordWithAt(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "/nonexistent")
	c, err := parseURL("postgres://app:pa@ssW0rd@db.example/prod?sslpassword=K3yPass", noEnv)
	if err != nil {
		t.Fatalf("parseURL: %v", err)
	}
	if c.conn.Host != "db.example" || c.conn.User != "app" || c.conn.Password != "pa@ssW0rd" || c.conn.Database != "prod" {
		t.Fatalf("host %q user %q password set %v db %q; want db.example, app, pa@ssW0rd, prod", c.conn.Host, c.conn.User, c.conn.Password == "pa@ssW0rd", c.conn.Database)
	}
	for _, s := range []string{c.where, c.display} {
		if strings.Contains(s, "ssW0rd") || strings.Contains(s, "pa@") {
			t.Errorf("%q shows part of the password", s)
		}
	}
	if !slices.Contains(c.secrets, "pa@ssW0rd") || !slices.Contains(c.secrets, "K3yPass") {
		t.Errorf("secrets %d entries: the password or sslpassword is not masked", len(c.secrets))
	}
}

func TestParseURLEnvPassword(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	getenv := func(k string) string {
		if k == EnvPassword {
			return "Env0Passw0rdX"
		}
		return ""
	}
	c, err := parseURL("postgres://app@h/db", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.conn.Password != "Env0Passw0rdX" || !slices.Contains(c.secrets, "Env0Passw0rdX") {
		t.Fatalf("PGPASSWORD not used or not kept secret: %q %v", c.conn.Password, c.secrets)
	}
	// The URL's password wins, as in libpq, and PGPASSWORD is then not even
	// read (leaderrun removes from the child what the store read).
	read := false
	spy := func(k string) string { read = read || k == EnvPassword; return getenv(k) }
	if c, err := parseURL("postgres://app:Url0Passw0rdX@h/db", spy); err != nil || c.conn.Password != "Url0Passw0rdX" || read {
		t.Fatalf("URL password: %v, PGPASSWORD read: %v", err, read)
	}
}

func TestParseURLRejects(t *testing.T) {
	const pw = "S3cretPassw0rd"
	t.Setenv("PGPASSWORD", "")
	for _, raw := range []string{
		"postgres:/app:" + pw + "@h/db",
		"postgres//app:" + pw + "@h/db",
		"postgres://app:" + pw,
		"postgres://app:" + pw + "/db",
		"mysql://app:" + pw + "@h/db",
		"postgres://app:" + pw + "@h/db#x",
		"postgres://app:" + pw + "@h:99999/db",
		"postgres://app:" + pw + "@h/db?table=Bad-Name",
		"postgres://app:" + pw + "@h/db?table=a.b.c",
		"postgres://app:" + pw + "@h/db?table=" + strings.Repeat("x", 58),
		"postgres://app:" + pw + "@h/db?table=a&table=b",
		"postgres://app:" + pw + "@h/db?sslmode=" + pw,
		"postgres://app:" + pw + "@h/db?connect_timeout=" + pw,
		"postgres://app:" + pw + "@h/a/b",
	} {
		_, err := parseURL(raw, noEnv)
		if err == nil {
			t.Errorf("parseURL(%q) accepted", raw)
			continue
		}
		if !errors.Is(err, lease.ErrConfig) {
			t.Errorf("parseURL(%q): %v does not wrap lease.ErrConfig", raw, err)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("parseURL(%q): error %q shows the password", raw, err)
		}
	}
}

// FuzzParseURL feeds parseURL a URL with a password in a credential
// position (":PASSWORD@") amid arbitrary text. It must never panic, every
// error must wrap lease.ErrConfig, and no error or display string may
// contain the password.
func FuzzParseURL(f *testing.F) {
	seeds := [][2]string{
		{"postgres://u", "h:5432/db"},
		{"postgres:/", "h/db"},
		{"postgres", "h"},
		{"postgresql://u", "h/db?sslmode=require&table=x"},
		{"postgres://u", "h:99999/db"},
		{"postgres://u", "h/db?S3cr3t=1"},
		{"postgres://u", "%2Ftmp/db"},
		{"postgres://u", "h1,h2:5433/db?target_session_attrs=read-write"},
		{"postgres://u", "h/db?table=a.b"},
	}
	for _, s := range seeds {
		f.Add(s[0], "S3cr3tPassw0rd", s[1])
	}
	f.Fuzz(func(t *testing.T, before, pass, after string) {
		if !leasetest.SecretLike(pass) || strings.Contains(before, pass) || strings.Contains(after, pass) {
			return
		}
		raw := before + ":" + pass + "@" + after
		if _, err := parseURL(raw, noEnv); err != nil && !errors.Is(err, lease.ErrConfig) {
			t.Fatalf("parseURL(%q) error %v does not wrap lease.ErrConfig", raw, err)
		}
		out := parseOutput(raw)
		leasetest.NoSecret(t, fmt.Sprintf("parseURL(%q)", raw), out, pass, func(p string) string {
			return parseOutput(before + ":" + p + "@" + after)
		})
	})
}

// parseOutput is what parseURL shows of raw: its error or its display form.
func parseOutput(raw string) string {
	c, err := parseURL(raw, noEnv)
	if err != nil {
		return err.Error()
	}
	return c.display
}

// The password file is read by leaderrun, not pgx: a regular file gives
// the password of the matching line (passfile= before PGPASSFILE, as in
// libpq); a FIFO (whose blocking open would hang for ever, deaf to signals)
// or a device is ErrConfig at once, naming the file, never read by pgx.
func TestParseURLPassfile(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	dir := t.TempDir()
	good := filepath.Join(dir, "pgpass")
	if err := os.WriteFile(good, []byte("other:5432:*:app:Wr0ngLine\ndb.example:5432:jobs:app:Fr0mPassf1le\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const base = "postgres://app@db.example/jobs?sslmode=disable"
	t.Setenv("PGPASSFILE", good)
	c, err := parseURL(base, noEnv)
	if err != nil || c.conn.Password != "Fr0mPassf1le" || !slices.Contains(c.secrets, "Fr0mPassf1le") {
		t.Fatalf("PGPASSFILE: %v; password found %v", err, c != nil && c.conn.Password == "Fr0mPassf1le")
	}
	t.Setenv("PGPASSFILE", fifo)
	if c, err := parseURL(base+"&passfile="+url.QueryEscape(good), noEnv); err != nil || c.conn.Password != "Fr0mPassf1le" {
		t.Fatalf("passfile= (PGPASSFILE a FIFO): %v", err)
	}
	t.Setenv("PGPASSFILE", filepath.Join(dir, "missing"))
	if c, err := parseURL(base, noEnv); err != nil || c.conn.Password != "" {
		t.Fatalf("a missing password file is skipped, as in libpq: %v", err)
	}
	for _, bad := range []string{fifo, "/dev/zero", dir} {
		t.Setenv("PGPASSFILE", bad)
		_, err1 := parseURL(base, noEnv)
		t.Setenv("PGPASSFILE", filepath.Join(dir, "missing"))
		_, err2 := parseURL(base+"&passfile="+url.QueryEscape(bad), noEnv)
		for _, err := range []error{err1, err2} {
			if !errors.Is(err, lease.ErrConfig) || !errors.Is(err, safefile.ErrNotRegular) || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
				t.Errorf("password file %s: %v; want one line, ErrConfig, not a regular file, naming the file", bad, err)
			}
		}
	}
	// The password in the URL wins: the file is not even opened.
	t.Setenv("PGPASSFILE", fifo)
	if _, err := parseURL("postgres://app:Url0Passw0rd@db.example/jobs", noEnv); err != nil {
		t.Fatalf("URL password with a FIFO as PGPASSFILE: %v", err)
	}
}

// The other files pgx would open itself, blocking, are checked first too:
// the service file (servicefile=, PGSERVICEFILE) when a service is named,
// and the default TLS files under ~/.postgresql when they exist.
func TestParseURLServiceAndDefaultTLSFiles(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "/nonexistent")
	t.Setenv("PGSERVICE", "")
	t.Setenv("PGSERVICEFILE", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	fifo := filepath.Join(home, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseURL("postgres://app:Passw0rdXY@h/db?service=x&servicefile="+url.QueryEscape(fifo), noEnv); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("servicefile= a FIFO: %v; want ErrConfig, not a regular file", err)
	}
	if err := os.Mkdir(filepath.Join(home, ".postgresql"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := parseURL("postgres://app:Passw0rdXY@h/db?sslmode=verify-full", noEnv); err != nil {
		t.Fatalf("no default TLS files: %v", err)
	}
	if err := unix.Mkfifo(filepath.Join(home, ".postgresql", "root.crt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseURL("postgres://app:Passw0rdXY@h/db?sslmode=verify-full", noEnv); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("~/.postgresql/root.crt a FIFO: %v; want ErrConfig, not a regular file", err)
	}
}
