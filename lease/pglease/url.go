package pglease

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgpassfile"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leaderrun/leaderrun/internal/plainhost"
	"github.com/leaderrun/leaderrun/internal/safefile"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeurl"
)

// Schemes lists every URL scheme Open accepts (libpq's own).
var Schemes = []string{"postgres", "postgresql"}

// DefaultTable is the lease table's name when the URL has no table=.
const DefaultTable = "leaderrun_leases"

// TableParam is the URL query parameter that names the lease table
// (postgres://…/db?table=NAME or SCHEMA.NAME). It is leaderrun's own: it is
// removed before the rest of the URL goes to pgx.
const TableParam = "table"

// WaitParam is the URL query parameter that says how a waiter waits:
// "listen" (the default) keeps one connection LISTENing, so a release wakes
// it at once, for the first standbys in line and while the server has room
// (the others wait as under poll); "poll" holds no connection between
// checks, sleeping until the expiry the server reported: through a pooler
// in transaction mode (PgBouncer), which cannot carry LISTEN.
const WaitParam = "wait"

// EnvPassword is read (through Options.Getenv) for the password when the URL
// carries none, as libpq and psql read it.
const EnvPassword = "PGPASSWORD"

// maxTable bounds table= so that TABLE_token (the sequence) and the LISTEN
// channel stay within PostgreSQL's 63-byte identifiers.
const maxTable = 57

// config is a parsed store URL.
type config struct {
	conn    *pgx.ConnConfig
	table   pgx.Identifier // [schema,] name
	tableS  string         // table as given, e.g. "leaderrun_leases" or "ops.leases"
	display string         // postgres://USER@HOST:PORT/DB?table=T, never a password
	where   string         // "PostgreSQL at 127.0.0.1:5432" for messages
	secrets []string       // passwords to keep out of every message
	poll    bool           // wait=poll: no LISTEN, no connection held between checks
}

// parseURL turns a store URL into pgx's connection settings. pgx fills what
// the URL leaves out from the PG* environment variables, ~/.pgpass
// (PGPASSFILE) and the service file, as libpq does, reading the process
// environment itself; the password alone is read through getenv
// (PGPASSWORD), so that leaderrun knows it consumed it. Errors wrap
// lease.ErrConfig and never contain the password or anything that could be
// one: they name the part that is wrong and never echo the URL's text. It
// works in steps: the scheme, the user info, the hosts and path, leaderrun's
// query parameters, the TLS files, pgx's parse, the password, then the text
// for people.
func parseURL(raw string, getenv func(string) string) (*config, error) {
	p, rest, err := parseScheme(raw)
	if err != nil {
		return nil, err
	}
	userinfo, hostPart, path, rawQuery := storeurl.Split(rest)
	if err := p.userInfo(userinfo); err != nil {
		return nil, err
	}
	if err := checkHostsPath(hostPart, path); err != nil {
		return nil, err
	}
	if err := p.params(rawQuery); err != nil {
		return nil, err
	}
	if err := checkTLSFiles(p.q); err != nil {
		return nil, err
	}
	if err := checkServiceFile(p.q); err != nil {
		return nil, err
	}
	cc, err := p.pgxConfig(hostPart + path)
	if err != nil {
		return nil, err
	}
	if !p.urlPass {
		// pgx read os.Getenv; getenv may differ (tests), and leaderrun's
		// records the read, so the child does not inherit a password the
		// store used. It is not read when the URL has a password.
		if v := getenv(EnvPassword); v != "" {
			cc.Password = v
		}
	}
	if cc.Password == "" {
		if cc.Password, err = passfilePassword(p.passfile, cc); err != nil {
			return nil, err
		}
	}
	if cc.Password != "" {
		p.secrets = append(p.secrets, cc.Password)
	}
	c := &config{conn: cc, table: p.ident, tableS: p.table, secrets: p.secrets, poll: p.poll}
	c.where, c.display = p.describe(cc)
	return c, nil
}

// badURL returns a store URL error; format and args must never carry the
// URL's text or a password.
func badURL(format string, args ...any) error {
	return storeerr.Config("bad PostgreSQL store URL: "+format, args...)
}

// urlParser holds what parseURL's steps share.
type urlParser struct {
	scheme   string         // lower-case
	userinfo string         // the user info re-encoded for pgx, "" when absent
	secrets  []string       // passwords to keep out of every message
	urlPass  bool           // the URL carries a password
	q        url.Values     // the query, without leaderrun's own parameters
	table    string         // table= as given, else DefaultTable
	ident    pgx.Identifier // table as an identifier
	poll     bool           // wait=poll
	passfile string         // passfile= as given ("" when absent)
}

// parseScheme checks the scheme and the characters the URL may not hold
// and returns the URL after "://".
func parseScheme(raw string) (*urlParser, string, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, "", badURL("want postgres://[USER[:PASSWORD]@]HOST[:PORT]/DB[?sslmode=…] (the URL is not shown: it may hold a password)")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "postgres" && scheme != "postgresql" {
		return nil, "", badURL("unknown scheme %s (want postgres or postgresql)", storeurl.SafeKey(scheme))
	}
	if strings.Contains(rest, "#") {
		return nil, "", badURL("a fragment (#…) is not allowed; percent-encode '#' as %%23")
	}
	if strings.ContainsRune(raw, 0) {
		return nil, "", badURL("a NUL byte is not allowed")
	}
	return &urlParser{scheme: scheme}, rest, nil
}

// userInfo decodes the user info, keeps its password as a secret and
// re-encodes it for pgx.
func (p *urlParser) userInfo(userinfo string) error {
	if userinfo == "" {
		return nil
	}
	u, pw, has := strings.Cut(userinfo, ":")
	user, err1 := url.PathUnescape(u)
	pass, err2 := url.PathUnescape(pw)
	if err1 != nil || err2 != nil {
		return badURL("bad percent-encoding in the user info")
	}
	if has && pass != "" {
		p.secrets = append(p.secrets, pass, pw)
		p.urlPass = true
	}
	// Split took the last '@' (a password may hold '@'); pgx must see
	// the same split, so the user info it gets is re-encoded: else it
	// took "ssW0rd@db" of "app:pa@ssW0rd@db" as the host, and printed it.
	if has {
		p.userinfo = url.UserPassword(user, pass).String()
	} else {
		p.userinfo = url.User(user).String()
	}
	return nil
}

// checkHostsPath refuses a host that is not plainHost and a path that is
// not /DBNAME.
func checkHostsPath(hostPart, path string) error {
	if hostPart != "" {
		for i, h := range strings.Split(hostPart, ",") {
			if !plainHost(h) {
				return badURL("the %s host is not HOST[:PORT] with a port from 1 to 65535 or a percent-encoded socket directory; it is not shown, since it may hold a password (a USER:PASSWORD must end with '@')", storeurl.Ordinal(i+1))
			}
		}
	}
	if _, err := url.PathUnescape(strings.TrimPrefix(path, "/")); err != nil || strings.Count(path, "/") > 1 {
		return badURL("the path must be /DBNAME (percent-encoded)")
	}
	return nil
}

// params parses the query, takes out table= and wait=, and keeps the
// passwords it holds as secrets.
func (p *urlParser) params(rawQuery string) error {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return badURL("bad query string")
	}
	p.q = q
	p.table = DefaultTable
	if v, ok := q[TableParam]; ok {
		if len(v) != 1 {
			return badURL("%s= given %d times", TableParam, len(v))
		}
		p.table = v[0]
		q.Del(TableParam)
	}
	if p.ident, err = parseTable(p.table); err != nil {
		return badURL("%v", err)
	}
	if v, ok := q[WaitParam]; ok {
		if len(v) != 1 || (v[0] != "listen" && v[0] != "poll") {
			return badURL("%s= wants listen (the default: the first standbys in line wake at once on a release, on a connection each while the server has room) or poll (no connection held between checks)", WaitParam)
		}
		p.poll = v[0] == "poll"
		q.Del(WaitParam)
	}
	if v := q.Get("password"); v != "" {
		p.secrets = append(p.secrets, v)
		p.urlPass = true
	}
	// The password file is read here (passfilePassword), never by pgx,
	// which opens it blocking: an empty passfile= is a file pgx cannot open,
	// which it ignores.
	p.passfile = q.Get("passfile")
	q.Set("passfile", "")
	if v := q.Get("sslpassword"); v != "" {
		p.secrets = append(p.secrets, v)
	}
	return nil
}

// checkTLSFiles checks the TLS files named in q, else in libpq's variables,
// else the defaults under ~/.postgresql when they exist. pgx opens them
// itself, blocking: a FIFO would hang the run deaf to signals, /dev/zero
// would be read without end.
func checkTLSFiles(q url.Values) error {
	defaults := map[string]string{"sslrootcert": "root.crt", "sslcert": "postgresql.crt", "sslkey": "postgresql.key"}
	for _, k := range []string{"sslrootcert", "sslcert", "sslkey"} {
		f := cmp.Or(q.Get(k), os.Getenv("PG"+strings.ToUpper(k)))
		dflt := f == ""
		if dflt {
			f = homeFile(".postgresql", defaults[k])
		}
		if f == "" || f == "system" && k == "sslrootcert" {
			continue
		}
		if err := safefile.Check(f); err != nil && !(dflt && errors.Is(err, fs.ErrNotExist)) {
			return badURL("%s=: %v", k, err)
		}
	}
	return nil
}

// homeFile is the file name under the home directory, "" when there is no
// home directory: where pgx looks for ~/.pgpass and the like.
func homeFile(name ...string) string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(append([]string{home}, name...)...)
}

// checkServiceFile checks the service file pgx reads (opening it blocking)
// when a service is named: servicefile=, else PGSERVICEFILE, else
// ~/.pg_service.conf; a missing file is pgx's to report.
func checkServiceFile(q url.Values) error {
	if q.Get("service") == "" && os.Getenv("PGSERVICE") == "" {
		return nil
	}
	f := cmp.Or(q.Get("servicefile"), os.Getenv("PGSERVICEFILE"), homeFile(".pg_service.conf"))
	if f == "" {
		return nil
	}
	if err := safefile.Check(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return badURL("servicefile=: %v", err)
	}
	return nil
}

// passfilePassword returns the password for cc's first host, port,
// database and user from the password file (the ~/.pgpass format): given
// (passfile=), else PGPASSFILE, else ~/.pgpass, as libpq looks. The file is
// read like the TLS files (safefile: opened non-blocking, a regular file of
// bounded size), so a FIFO or a device is refused at once (ErrConfig)
// instead of hanging the run deaf to signals. A file that is missing or may
// not be read is skipped, as libpq and pgx skip it.
func passfilePassword(given string, cc *pgx.ConnConfig) (string, error) {
	path := cmp.Or(given, os.Getenv("PGPASSFILE"), homeFile(".pgpass"))
	if path == "" {
		return "", nil
	}
	b, err := safefile.Read(path)
	switch {
	case errors.Is(err, safefile.ErrNotRegular), errors.Is(err, safefile.ErrTooBig):
		return "", lease.NewError(fmt.Sprintf("PostgreSQL password file (passfile= or PGPASSFILE): %v", err), lease.ErrConfig, err)
	case err != nil:
		return "", nil
	}
	pf, err := pgpassfile.ParsePassfile(bytes.NewReader(b))
	if err != nil {
		return "", nil
	}
	host := cc.Host
	if network, _ := pgconn.NetworkAddress(cc.Host, cc.Port); network == "unix" {
		host = "localhost" // libpq's name for a socket directory in the file
	}
	return pf.FindPassword(host, strconv.Itoa(int(cc.Port)), cc.Database, cc.User), nil
}

// pgxConfig has pgx parse the URL rebuilt from the re-encoded user info,
// hostPath (the hosts and path as given) and the remaining query. Its error
// shows only pgx's reason, with every query value and secret masked.
func (p *urlParser) pgxConfig(hostPath string) (*pgx.ConnConfig, error) {
	dsn := p.scheme + "://"
	if p.userinfo != "" {
		dsn += p.userinfo + "@"
	}
	dsn += hostPath
	if len(p.q) > 0 {
		dsn += "?" + p.q.Encode()
	}
	cc, err := pgx.ParseConfig(dsn)
	if err == nil {
		return cc, nil
	}
	// pgx redacts what it recognises as a password, best effort; show
	// only its reason, with every query value and secret masked too.
	var pe *pgconn.ParseConfigError
	msg := "cannot parse it"
	if errors.As(err, &pe) && errors.Unwrap(pe) != nil {
		msg = errors.Unwrap(pe).Error()
	}
	hide := append([]string{}, p.secrets...)
	for _, vs := range p.q {
		hide = append(hide, vs...)
	}
	hide = append(hide, os.Getenv(EnvPassword)) // what pgx read; getenv is left alone so it records only real use
	return nil, badURL("%s (the URL is not shown: it may hold a password)", mask(msg, hide))
}

// describe returns the server for people and the URL to display, which
// never holds a password.
func (p *urlParser) describe(cc *pgx.ConnConfig) (where, display string) {
	host := cc.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(cc.Port)))
	} else {
		host += " (port " + strconv.Itoa(int(cc.Port)) + ")"
	}
	disp := p.scheme + "://"
	if cc.User != "" {
		disp += url.PathEscape(cc.User) + "@"
	}
	if strings.HasPrefix(cc.Host, "/") {
		disp += "/" + url.PathEscape(cc.Database) + "?host=" + url.QueryEscape(cc.Host) + "&port=" + strconv.Itoa(int(cc.Port))
		if p.table != DefaultTable {
			disp += "&table=" + p.table
		}
	} else {
		disp += host + "/" + url.PathEscape(cc.Database)
		if p.table != DefaultTable {
			disp += "?table=" + p.table
		}
	}
	return "PostgreSQL at " + host, disp
}

// parseTable checks table= (NAME or SCHEMA.NAME, lower-case letters, digits
// and '_', not starting with a digit) and returns it as an identifier.
func parseTable(s string) (pgx.Identifier, error) {
	if s == "" || len(s) > maxTable {
		return nil, errors.New("table= wants 1 to 57 characters")
	}
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return nil, errors.New("table= wants NAME or SCHEMA.NAME")
	}
	for _, p := range parts {
		if p == "" || p[0] >= '0' && p[0] <= '9' || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return nil, errors.New("table= wants lower-case letters, digits and '_' (NAME or SCHEMA.NAME, not starting with a digit)")
		}
	}
	return pgx.Identifier(parts), nil
}

// plainHost accepts NAME, NAME:PORT, [IPv6], [IPv6]:PORT (numeric port) and
// a percent-encoded socket directory (%2Fvar%2Frun%2Fpostgresql); anything
// else may be a password typed in the wrong place.
func plainHost(h string) bool {
	if strings.HasPrefix(strings.ToLower(h), "%2f") {
		if i := strings.LastIndex(h, ":"); i >= 0 {
			if !plainhost.Port(h[i+1:]) {
				return false
			}
			h = h[:i]
		}
		p, err := url.PathUnescape(h)
		return err == nil && !strings.ContainsAny(p, ":@")
	}
	port, hasPort, ok := plainhost.Split(h)
	if !ok || hasPort && (!plainhost.Port(port) || strings.HasPrefix(h, ":")) {
		return false
	}
	return true
}

// mask readies text quoted from pgx: storeerr.Quote with every secret of 3
// bytes or more (a shorter query value would blank out unrelated text).
func mask(msg string, secrets []string) string { return storeerr.Quote(msg, secrets, 3) }
