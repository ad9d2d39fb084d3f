package mysqllease

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

const secret = "Sup3rS3cretPw"

func noEnv(string) string { return "" }

// TestParseURL: the forms docs/stores.md lists, and what they become.
func TestParseURL(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.my.cnf
	for _, tc := range []struct {
		raw, net, addr, db, user, table, display string
	}{
		{"mysql://app:" + secret + "@db.example:3307/jobs", "tcp", "db.example:3307", "jobs", "app", DefaultTable, "mysql://app@db.example:3307/jobs"},
		{"mariadb://app@db.example/jobs?table=locks", "tcp", "db.example:3306", "jobs", "app", "locks", "mariadb://app@db.example:3306/jobs?table=locks"},
		{"mysql://app@[::1]:4000/jobs", "tcp", "[::1]:4000", "jobs", "app", DefaultTable, "mysql://app@[::1]:4000/jobs"},
		{"MySQL://app@/jobs?socket=/run/mysqld/mysqld.sock", "unix", "/run/mysqld/mysqld.sock", "jobs", "app", DefaultTable, "mysql://app@/jobs?socket=%2Frun%2Fmysqld%2Fmysqld.sock"},
		{"mysql://a%40b:p%2Fw@h/d%2Db", "tcp", "h:3306", "d-b", "a@b", DefaultTable, "mysql://a@b@h:3306/d-b"},
	} {
		c, err := parseURL(tc.raw, noEnv)
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		dc := c.driver
		if dc.Net != tc.net || dc.Addr != tc.addr || dc.DBName != tc.db || dc.User != tc.user || c.table != tc.table || c.display != tc.display {
			t.Errorf("%s: got %s %s db %q user %q table %q display %q", tc.raw, dc.Net, dc.Addr, dc.DBName, dc.User, c.table, c.display)
		}
		if strings.Contains(c.display, secret) || strings.Contains(c.where, secret) {
			t.Errorf("%s: the password shows in %q or %q", tc.raw, c.display, c.where)
		}
	}
}

// TestParseURLRefused: bad URLs are ErrConfig, one line, and never show
// the password or the URL's text.
func TestParseURLRefused(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	db := "mysql://u:" + secret + "@h/db" // a URL the cases add to
	for _, tc := range []struct{ raw, want string }{
		{"mysql:/u:" + secret + "@h/db", "want mysql://"},
		{"postgres://u:" + secret + "@h/db", "unknown scheme"},
		{db + "#x", "fragment"},
		{"mysql://u:" + secret + "@h", "the path must be /DATABASE"},
		{"mysql://u:" + secret + "@h/a/b", "the path must be /DATABASE"},
		{db + "?tsl=true", "unknown query parameter"},
		{"mysql://u@h:" + secret + "/db", "not HOST[:PORT]"},
		{"mysql://u@h:0/db", "not HOST[:PORT]"},
		{db + "?table=Bad", "table= wants"},
		{db + "?poll=1ms", "poll= wants"},
		{db + "?tls=maybe", "tls= wants"},
		{db + "?tls=false&ca=/x", "ca= needs TLS"},
		{db + "?tls=skip-verify&ca=/etc/hostname", "goes with tls=true"},
		{db + "?ca=/nonexistent/ca.pem", "ca="},
		{db + "?ca=/dev/zero", "not a regular file"},
		{"mysql://u:" + secret + "@/db?socket=rel/sock", "absolute path"},
		{db + "?socket=/s", "either a host or socket="},
		{db + "?table=a&table=b", "given 2 times"},
		{"mysql://:" + secret + "@h/db", "no user"},
	} {
		_, err := parseURL(tc.raw, noEnv)
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrConfig saying %q", tc.raw, err, tc.want)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, secret) || strings.Contains(msg, "\n") {
			t.Errorf("%s: message %q shows the password or has several lines", tc.raw, msg)
		}
	}
}

// TestTLSModes: tls= and ca= set the driver's TLS as documented.
func TestTLSModes(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	ca := leasetest.WriteCerts(t, t.TempDir())
	for _, tc := range []struct {
		q            string
		tls, verify  bool
		driverConfig string
	}{
		{"", false, false, ""},
		{"tls=false", false, false, ""},
		{"tls=true", true, true, ""},
		{"ca=" + ca, true, true, ""},
		{"tls=skip-verify", false, false, "skip-verify"},
		{"tls=preferred", false, false, "preferred"},
	} {
		c, err := parseURL("mysql://u@db.example/d?"+tc.q, noEnv)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		dc := c.driver
		if (dc.TLS != nil) != tc.tls || dc.TLSConfig != tc.driverConfig {
			t.Errorf("%s: TLS %v, TLSConfig %q", tc.q, dc.TLS, dc.TLSConfig)
			continue
		}
		if tc.verify && (dc.TLS.InsecureSkipVerify || dc.TLS.ServerName != "db.example") {
			t.Errorf("%s: does not verify db.example", tc.q)
		}
		if strings.HasPrefix(tc.q, "ca=") && dc.TLS.RootCAs == nil {
			t.Errorf("%s: no roots from the CA file", tc.q)
		}
	}
}

// TestPasswordSources: the URL's password, else option-file=, else
// MYSQL_PWD, else ~/.my.cnf; the user from the option file when the URL
// has none; every password is a secret for messages.
func TestPasswordSources(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	write := func(path, text string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	opt := filepath.Join(t.TempDir(), "extra.cnf")
	write(opt, "# comment\n[mysqld]\npassword=server-side\n[client]\nuser = fileuser\npassword = \"from file\"\n[other]\npassword=nope\n", 0o600)
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvPassword {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name, raw  string
		getenv     func(string) string
		pass, user string
	}{
		{"url", "mysql://u:fromurl@h/d?option-file=" + opt, env("fromenv"), "fromurl", "u"},
		{"option-file", "mysql://u@h/d?option-file=" + opt, env("fromenv"), "from file", "u"},
		{"option-file user", "mysql://h/d?option-file=" + opt, noEnv, "from file", "fileuser"},
		{"env", "mysql://u@h/d", env("fromenv"), "fromenv", "u"},
		{"none", "mysql://u@h/d", noEnv, "", "u"},
	} {
		c, err := parseURL(tc.raw, tc.getenv)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.driver.Passwd != tc.pass || c.driver.User != tc.user {
			t.Errorf("%s: password %q user %q; want %q %q", tc.name, c.driver.Passwd, c.driver.User, tc.pass, tc.user)
		}
		if tc.pass != "" && !contains(c.secrets, tc.pass) {
			t.Errorf("%s: the password is not among the secrets", tc.name)
		}
	}
	write(filepath.Join(home, ".my.cnf"), "[mysql]\npassword='from home'\n", 0o600)
	if c, err := parseURL("mysql://u@h/d", noEnv); err != nil || c.driver.Passwd != "from home" {
		t.Fatalf("~/.my.cnf: %v, %q", err, c.driver.Passwd)
	}
	if c, err := parseURL("mysql://u@h/d", env("fromenv")); err != nil || c.driver.Passwd != "fromenv" {
		t.Fatalf("MYSQL_PWD before ~/.my.cnf: %v, %q", err, c.driver.Passwd)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestOptionFileRefused: an option file that is a FIFO or a device, one
// anybody may write, one owned by another user, or a missing one named
// with option-file= is ErrConfig, at once (the FIFO is never opened
// blocking).
func TestOptionFileRefused(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open.cnf")
	if err := os.WriteFile(open, []byte("[client]\npassword=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{fifo: "not a regular file", "/dev/zero": "not a regular file", open: "may be written by anybody", filepath.Join(dir, "missing"): "no such file"}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(dir, "foreign.cnf")
		if err := os.WriteFile(foreign, []byte("[client]\npassword=x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		cases[foreign] = "belongs to user 4242"
	}
	for f, want := range cases {
		_, err := parseURL("mysql://u@h/d?option-file="+f, noEnv)
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want ErrConfig saying %q", f, err, want)
		}
	}
	// The default ~/.my.cnf is checked the same way when it exists.
	if err := os.Symlink(fifo, filepath.Join(os.Getenv("HOME"), ".my.cnf")); err != nil {
		t.Fatal(err)
	}
	if _, err := parseURL("mysql://u@h/d", noEnv); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("~/.my.cnf a FIFO: %v; want ErrConfig", err)
	}
}

// TestBind: :name placeholders become ? in order; a literal's ':00' is
// left alone.
func TestBind(t *testing.T) {
	q, args := bind("SELECT :a, '00:00:00', :b_1, :a", map[string]any{"a": 1, "b_1": "x"})
	if q != "SELECT ?, '00:00:00', ?, ?" || len(args) != 3 || args[0] != 1 || args[1] != "x" || args[2] != 1 {
		t.Fatalf("bind: %q %v", q, args)
	}
}
