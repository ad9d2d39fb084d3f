package mysqllease

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/leaderrun/leaderrun/internal/plainhost"
	"github.com/leaderrun/leaderrun/internal/safefile"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeurl"
)

// Schemes lists every URL scheme Open accepts.
var Schemes = []string{"mysql", "mariadb"}

// DefaultTable is the lease table's name when the URL has no table=.
const DefaultTable = "leaderrun_leases"

// EnvPassword is read (through Options.Getenv) for the password when
// neither the URL nor an option file named with option-file= carries one,
// as the mysql client reads it.
const EnvPassword = "MYSQL_PWD"

// DefaultPoll is how often a waiter at the front of the line reads the
// lease row (poll=): MySQL has no notification a waiter could sleep on.
const DefaultPoll = 250 * time.Millisecond

// minPoll bounds poll= from below: each read is a statement on the server.
const minPoll = 50 * time.Millisecond

// maxTable bounds table= so that TABLE_standbys and TABLE_runs stay within
// MySQL's 64-byte identifiers.
const maxTable = 55

// config is a parsed store URL.
type config struct {
	driver  *mysql.Config
	table   string   // table= as given, e.g. "leaderrun_leases"
	display string   // mysql://USER@HOST:PORT/DB?table=T, never a password
	where   string   // "MySQL at 127.0.0.1:3306" for messages
	secrets []string // passwords to keep out of every message
	poll    time.Duration
}

// badURL returns a store URL error; format and args must never carry the
// URL's text or a password.
func badURL(format string, args ...any) error {
	return storeerr.Config("bad MySQL store URL: "+format, args...)
}

// parseURL turns a store URL into the driver's settings:
//
//	mysql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?PARAMS]   (also mariadb://)
//
// PARAMS are table=NAME, poll=DURATION, socket=PATH (a Unix socket instead
// of HOST:PORT, which may then be left out: mysql://USER@/DB?socket=…),
// tls=true|skip-verify|preferred|false, ca=FILE (the roots to verify the
// server with; implies tls=true) and option-file=FILE. The password comes
// from the URL, else the option file named by option-file=, else
// MYSQL_PWD (getenv), else ~/.my.cnf, as the mysql client reads them
// ([client] and [mysql] groups, password= and user=). Errors wrap
// lease.ErrConfig and never contain the password or anything that could be
// one.
func parseURL(raw string, getenv func(string) string) (*config, error) {
	scheme, rest, err := parseScheme(raw)
	if err != nil {
		return nil, err
	}
	userinfo, host, path, rawQuery := storeurl.Split(rest)
	user, pass, hasPass, err := storeurl.UserInfo(userinfo)
	if err != nil {
		return nil, badURL("%v", err)
	}
	c := &config{driver: mysql.NewConfig(), table: DefaultTable, poll: DefaultPoll}
	if hasPass && pass != "" {
		c.secrets = append(c.secrets, pass, strings.SplitN(userinfo, ":", 2)[1])
	}
	q, err := storeurl.Query(rawQuery)
	if err != nil {
		return nil, badURL("%v", err)
	}
	// A value that fails to parse may be a password typed in the wrong
	// place: every one is a secret for messages quoted from elsewhere.
	for _, vs := range q {
		c.secrets = append(c.secrets, vs...)
	}
	db, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err != nil || strings.Contains(db, "/") || db == "" {
		return nil, badURL("the path must be /DATABASE (percent-encoded)")
	}
	dc := c.driver
	dc.User, dc.DBName = user, db
	if err := c.params(q, host); err != nil {
		return nil, err
	}
	if !hasPass || pass == "" {
		pass, user, err = findPassword(q.Get("option-file"), getenv)
		if err != nil {
			return nil, err
		}
		if dc.User == "" {
			dc.User = user
		}
		if pass != "" {
			c.secrets = append(c.secrets, pass)
		}
	}
	if dc.User == "" {
		return nil, badURL("no user: give mysql://USER@HOST/DATABASE (or user= in the option file)")
	}
	dc.Passwd = pass
	c.describe(scheme, q)
	return c, nil
}

// parseScheme checks the scheme and the characters the URL may not hold
// and returns the scheme (lower-case) and the URL after "://".
func parseScheme(raw string) (scheme, rest string, err error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", badURL("want mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE (the URL is not shown: it may hold a password)")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "mysql" && scheme != "mariadb" {
		return "", "", badURL("unknown scheme %s (want mysql or mariadb)", storeurl.SafeKey(scheme))
	}
	if strings.Contains(rest, "#") {
		return "", "", badURL("a fragment (#…) is not allowed; percent-encode '#' as %%23")
	}
	if strings.ContainsRune(raw, 0) {
		return "", "", badURL("a NUL byte is not allowed")
	}
	return scheme, rest, nil
}

// params applies the query parameters and the host (or socket=).
func (c *config) params(q url.Values, host string) error {
	dc := c.driver
	for k := range q {
		switch k {
		case "table", "poll", "socket", "tls", "ca", "option-file":
		default:
			return badURL("unknown query parameter %s (want table=, poll=, socket=, tls=, ca= or option-file=)", storeurl.SafeKey(k))
		}
	}
	if v, ok := q["table"]; ok {
		if err := checkTable(v[0]); err != nil {
			return badURL("%v", err)
		}
		c.table = v[0]
	}
	if v := q.Get("poll"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < minPoll || d > time.Minute {
			return badURL("poll= wants a duration from %v to 1m (how often a waiter at the front of the line reads the lease)", minPoll)
		}
		c.poll = d
	}
	if sock := q.Get("socket"); sock != "" {
		if host != "" {
			return badURL("give either a host or socket=, not both")
		}
		if !filepath.IsAbs(sock) {
			return badURL("socket= wants an absolute path")
		}
		dc.Net, dc.Addr = "unix", sock
	} else {
		if !plainHost(host) {
			return badURL("the host is not HOST[:PORT] with a port from 1 to 65535; it is not shown, since it may hold a password (a USER:PASSWORD must end with '@')")
		}
		hp, err := storeurl.HostPort(host, "3306")
		if err != nil {
			return badURL("the host is not HOST[:PORT] with a port from 1 to 65535")
		}
		dc.Net, dc.Addr = "tcp", hp
	}
	return c.tlsParams(q)
}

// tlsParams sets TLS from tls= and ca=.
func (c *config) tlsParams(q url.Values) error {
	dc := c.driver
	mode := q.Get("tls")
	ca := q.Get("ca")
	switch mode {
	case "", "false":
		if ca != "" {
			if mode == "false" {
				return badURL("ca= needs TLS; leave out tls=false")
			}
			mode = "true"
		}
	case "true", "skip-verify", "preferred":
	default:
		return badURL("tls= wants true, skip-verify, preferred or false")
	}
	switch mode {
	case "true":
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if dc.Net == "tcp" {
			host, _, _ := net.SplitHostPort(dc.Addr)
			tc.ServerName = host
		}
		if ca != "" {
			pem, err := safefile.Read(ca)
			if err != nil {
				return badURL("ca=: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return badURL("ca=: no PEM certificates found")
			}
			tc.RootCAs = pool
		}
		dc.TLS = tc
	case "skip-verify", "preferred":
		if ca != "" {
			return badURL("ca= verifies the server; it goes with tls=true, not tls=%s", mode)
		}
		dc.TLSConfig = mode
	}
	return nil
}

// describe sets where and display.
func (c *config) describe(scheme string, q url.Values) {
	dc := c.driver
	addr := dc.Addr
	if dc.Net == "unix" {
		addr = "socket " + dc.Addr
	}
	c.where = "MySQL at " + addr
	d := scheme + "://" + url.PathEscape(dc.User) + "@"
	if dc.Net == "tcp" {
		d += dc.Addr
	}
	d += "/" + url.PathEscape(dc.DBName)
	var ps []string
	if dc.Net == "unix" {
		ps = append(ps, "socket="+url.QueryEscape(dc.Addr))
	}
	if c.table != DefaultTable {
		ps = append(ps, "table="+c.table)
	}
	for _, k := range []string{"tls", "ca", "poll"} {
		if v := q.Get(k); v != "" {
			ps = append(ps, k+"="+url.QueryEscape(v))
		}
	}
	if len(ps) > 0 {
		d += "?" + strings.Join(ps, "&")
	}
	c.display = d
}

// checkTable checks table= : lower-case letters, digits and '_', not
// starting with a digit, 1 to maxTable bytes.
func checkTable(s string) error {
	if s == "" || len(s) > maxTable || s[0] >= '0' && s[0] <= '9' || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return fmt.Errorf("table= wants 1 to %d lower-case letters, digits and '_', not starting with a digit", maxTable)
	}
	return nil
}

// plainHost accepts NAME, NAME:PORT, [IPv6] and [IPv6]:PORT (numeric
// port); anything else may be a password typed in the wrong place.
func plainHost(h string) bool {
	port, hasPort, ok := plainhost.Split(h)
	return ok && h != "" && (!hasPort || plainhost.Port(port) && !strings.HasPrefix(h, ":"))
}

// findPassword returns the password (and user) for a URL without one: from
// the option file named (which must then be readable), else MYSQL_PWD,
// else ~/.my.cnf when it exists.
func findPassword(optionFile string, getenv func(string) string) (pass, user string, err error) {
	if optionFile != "" {
		return readOptionFile(optionFile, true)
	}
	if v := getenv(EnvPassword); v != "" {
		return v, "", nil
	}
	home, herr := os.UserHomeDir()
	if herr != nil {
		return "", "", nil
	}
	return readOptionFile(filepath.Join(home, ".my.cnf"), false)
}

// readOptionFile reads password= and user= of the [client] and [mysql]
// groups of an option file (later lines win, as in the mysql client). The
// file is read like the TLS files (safefile: opened non-blocking, a regular
// file of at most 1 MiB), so a FIFO or a device is refused at once instead
// of hanging the run deaf to signals; a file owned by another user (not
// root), or one anybody may write, is refused too (the mysql client
// ignores a world-writable one: whoever can write it chooses the server
// our password goes to). A missing default file (given false) is no
// error.
func readOptionFile(path string, given bool) (pass, user string, err error) {
	b, err := safefile.Read(path)
	if err != nil {
		if !given && errors.Is(err, fs.ErrNotExist) {
			return "", "", nil
		}
		return "", "", lease.NewError(fmt.Sprintf("MySQL option file (option-file= or ~/.my.cnf): %v", err), lease.ErrConfig, err)
	}
	if fi, err := os.Stat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != uint32(os.Geteuid()) && st.Uid != 0 {
			return "", "", lease.NewError(fmt.Sprintf("MySQL option file %s belongs to user %d, not to this user or root: refused", path, st.Uid), lease.ErrConfig)
		}
		if fi.Mode().Perm()&0o002 != 0 {
			return "", "", lease.NewError(fmt.Sprintf("MySQL option file %s may be written by anybody: refused (chmod o-w)", path), lease.ErrConfig)
		}
	}
	group := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), safefile.MaxSize)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			group = strings.ToLower(strings.TrimSpace(strings.Trim(line, "[]")))
			continue
		}
		if group != "client" && group != "mysql" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		k = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "_", "-")
		v = unquoteOption(strings.TrimSpace(v))
		switch k {
		case "password":
			pass = v
		case "user":
			user = v
		}
	}
	return pass, user, nil
}

// unquoteOption removes the quotes of an option value ('…' or "…", with
// backslash escapes inside double quotes, as the mysql client reads them).
func unquoteOption(v string) string {
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		inner := v[1 : len(v)-1]
		if v[0] == '"' {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
		}
		return inner
	}
	if i := strings.Index(v, " #"); i >= 0 { // a comment after an unquoted value
		v = strings.TrimSpace(v[:i])
	}
	return v
}
