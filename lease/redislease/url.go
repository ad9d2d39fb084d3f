package redislease

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeurl"
	"github.com/redis/go-redis/v9"
)

// Topology names the kind of deployment a store URL points at.
type Topology string

// The topologies a store URL can name.
const (
	Single   Topology = "single"
	Sentinel Topology = "sentinel"
	Cluster  Topology = "cluster"
)

// Schemes lists every URL scheme Open accepts.
var Schemes = []string{"redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"}

// EnvPassword is read for the password when the URL carries none (the same
// variable redis-cli reads).
const EnvPassword = "REDISCLI_AUTH"

// EnvSentinelPassword is read for the Sentinel processes' own password
// (Sentinel URLs only); the URL's password is the master's.
const EnvSentinelPassword = "LEADERRUN_REDIS_SENTINEL_PASSWORD"

// config is a parsed store URL.
type config struct {
	topo    Topology
	opts    redis.UniversalOptions
	display string   // the URL with the password masked, for messages
	where   string   // the server for people: "Redis at 127.0.0.1:6379"
	secrets []string // passwords to keep out of every message
}

// parseURL turns a store URL into client options. Its errors wrap
// lease.ErrConfig and never contain the password or anything that could be
// one: they name the part that is wrong and never echo the URL's text (a
// typo can put a password anywhere, e.g. "redis:/:PW@h" or "redis://u:PW").
// It works in steps: the scheme and topology, the user info, the query
// parameters, the hosts and path, TLS, then the text for people.
func parseURL(raw string, getenv func(string) string) (*config, error) {
	p, rest, err := parseScheme(raw)
	if err != nil {
		return nil, err
	}
	p.getenv = getenv
	userinfo, hostPart, path, rawQuery := storeurl.Split(rest)
	if err := p.userInfo(userinfo); err != nil {
		return nil, err
	}
	if err := p.params(rawQuery); err != nil {
		return nil, err
	}
	if err := p.addrs(hostPart, path); err != nil {
		return nil, err
	}
	if p.db > 0 {
		p.c.opts.DB = p.db
	}
	if err := p.tls(); err != nil {
		return nil, err
	}
	p.describe()
	return p.c, nil
}

// badURL returns a store URL error; format and args must never carry the
// URL's text or a password.
func badURL(format string, args ...any) error {
	return storeerr.Config("bad Redis store URL: "+format, args...)
}

// urlParser holds what parseURL's steps share while they fill in c.
type urlParser struct {
	c        *config
	getenv   func(string) string
	scheme   string     // lower-case
	tlsOn    bool       // a rediss… scheme
	userinfo string     // as in the URL, "" when absent
	user     string     // decoded user name
	hasPass  bool       // the URL carries a password
	q        url.Values // the query parameters
	db       int        // the database number, -1 when not given
}

// parseScheme reads the scheme (and so the topology and TLS) and returns
// the URL after "://", refusing a fragment.
func parseScheme(raw string) (*urlParser, string, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, "", badURL("want scheme://…, e.g. redis://host:6379/0 (the URL is not shown: it may hold a password)")
	}
	scheme = strings.ToLower(scheme)
	p := &urlParser{c: &config{topo: Single}, scheme: scheme, tlsOn: strings.HasPrefix(scheme, "rediss"), db: -1}
	switch scheme {
	case "redis", "rediss", "unix":
	case "redis+sentinel", "rediss+sentinel":
		p.c.topo = Sentinel
	case "redis+cluster", "rediss+cluster":
		p.c.topo = Cluster
	default:
		return nil, "", badURL("unknown scheme %s (want one of %s)", storeurl.SafeKey(scheme), strings.Join(Schemes, ", "))
	}
	if strings.Contains(rest, "#") {
		return nil, "", badURL("a fragment (#…) is not allowed; percent-encode '#' as %%23")
	}
	return p, rest, nil
}

// userInfo sets the user and password from the URL's user info, the
// password from EnvPassword when the URL carries none.
func (p *urlParser) userInfo(userinfo string) error {
	p.userinfo = userinfo
	var pass string
	if userinfo != "" {
		var err error
		p.user, pass, p.hasPass, err = storeurl.UserInfo(userinfo)
		if err != nil {
			return badURL("%v", err)
		}
	}
	if !p.hasPass {
		pass = p.getenv(EnvPassword)
	}
	p.c.opts.Username, p.c.opts.Password = p.user, pass
	if pass != "" {
		p.c.secrets = append(p.c.secrets, pass)
	}
	return nil
}

// params parses the query, checks each parameter against the scheme and
// reads db=.
func (p *urlParser) params(rawQuery string) error {
	q, err := storeurl.Query(rawQuery)
	if err != nil {
		return badURL("%v", err)
	}
	p.q = q
	for k := range q {
		if err := p.checkParam(k, rawQuery); err != nil {
			return err
		}
	}
	if v := q.Get("db"); v != "" {
		return p.setDB(v, "db=")
	}
	return nil
}

// checkParam refuses an unknown query parameter k, or one the scheme does
// not take.
func (p *urlParser) checkParam(k, rawQuery string) error {
	switch k {
	case "db":
		if p.c.topo == Cluster {
			return badURL("Redis Cluster has only database 0; drop db=")
		}
	case "ca", "cert", "key", "servername":
		if !p.tlsOn {
			return badURL("%s= needs TLS: use a rediss… scheme", k)
		}
	case "sentinel_user":
		if p.c.topo != Sentinel {
			return badURL("sentinel_user= is for redis+sentinel:// URLs")
		}
	default:
		return badURL("unknown query parameter %s (known: db, ca, cert, key, servername, sentinel_user)", storeurl.QueryKey(k, rawQuery))
	}
	return nil
}

// setDB sets the database number from s, found in where ("db=" or "the
// path"), refusing a second, different one.
func (p *urlParser) setDB(s, where string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<20 {
		return badURL("bad database number in %s (want 0 to %d)", where, 1<<20)
	}
	if p.db >= 0 && p.db != n {
		return badURL("database given twice (path and db=)")
	}
	p.db = n
	return nil
}

// addrs sets the server addresses and what the path names: a socket for
// unix://, else the hosts and the topology's path.
func (p *urlParser) addrs(hostPart, path string) error {
	if p.scheme == "unix" {
		return p.socket(hostPart, path)
	}
	if err := p.hosts(hostPart); err != nil {
		return err
	}
	return p.path(path)
}

// socket sets the address of a unix:// URL: its path, with no host.
func (p *urlParser) socket(hostPart, path string) error {
	if hostPart != "" {
		return badURL("unix:// takes a socket path: unix:///path/to/redis.sock?db=N")
	}
	sock, err := url.PathUnescape(path)
	if err != nil || sock == "" || sock == "/" {
		return badURL("unix:// needs a socket path: unix:///path/to/redis.sock?db=N")
	}
	p.c.opts.Addrs = []string{sock} // go-redis dials "unix" for an address starting with '/'
	return nil
}

// hosts sets the addresses from the comma-separated HOST[:PORT] list, with
// the topology's default port; a single server takes one host.
func (p *urlParser) hosts(hostPart string) error {
	if hostPart == "" {
		return badURL("missing host")
	}
	defPort := "6379"
	if p.c.topo == Sentinel {
		defPort = "26379"
	}
	for i, h := range strings.Split(hostPart, ",") {
		addr, err := storeurl.HostPort(h, defPort)
		if err != nil {
			return badURL("the %s host is not HOST[:PORT] with a port from 1 to 65535; it is not shown, since it may hold a password (a USER:PASSWORD must end with '@')", storeurl.Ordinal(i+1))
		}
		p.c.opts.Addrs = append(p.c.opts.Addrs, addr)
	}
	if p.c.topo == Single && len(p.c.opts.Addrs) > 1 {
		return badURL("several hosts: use redis+cluster://h1:p1,h2:p2 or redis+sentinel://s1,s2/master")
	}
	return nil
}

// path reads the path as the topology wants it: /DB for a single server,
// /MASTERNAME[/DB] for Sentinel, nothing for a cluster.
func (p *urlParser) path(path string) error {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		segs = nil
	}
	switch p.c.topo {
	case Single:
		if len(segs) > 1 {
			return badURL("path must be /DB")
		}
		if len(segs) == 1 {
			return p.setDB(segs[0], "the path")
		}
	case Sentinel:
		return p.sentinel(segs)
	case Cluster:
		if len(segs) != 0 {
			return badURL("Cluster URLs have no path: redis+cluster://host:port[,host:port…]")
		}
		p.c.opts.IsClusterMode = true
	}
	return nil
}

// sentinel sets the master name and database from a Sentinel URL's path
// segments, and the Sentinel processes' own user and password.
func (p *urlParser) sentinel(segs []string) error {
	if len(segs) < 1 || len(segs) > 2 {
		return badURL("Sentinel URLs are redis+sentinel://host:26379[,host:26379…]/MASTERNAME[/DB]")
	}
	name, err := url.PathUnescape(segs[0])
	if err != nil || name == "" {
		return badURL("bad master name")
	}
	p.c.opts.MasterName = name
	if len(segs) == 2 {
		if err := p.setDB(segs[1], "the path"); err != nil {
			return err
		}
	}
	p.c.opts.SentinelUsername = p.q.Get("sentinel_user")
	p.c.opts.SentinelPassword = p.getenv(EnvSentinelPassword)
	if p.c.opts.SentinelPassword != "" {
		p.c.secrets = append(p.c.secrets, p.c.opts.SentinelPassword)
	}
	return nil
}

// tls sets the TLS settings from the query for a rediss… scheme.
func (p *urlParser) tls() error {
	if !p.tlsOn {
		return nil
	}
	tc, err := storeurl.TLSConfig(p.q)
	if err != nil {
		return badURL("%v", err)
	}
	p.c.opts.TLSConfig = tc
	return nil
}

// describe sets the display URL, with the password masked, and the server
// for people.
func (p *urlParser) describe() {
	c := p.c
	disp := p.scheme + "://"
	if p.userinfo != "" {
		disp += url.PathEscape(p.user)
		if p.hasPass {
			disp += ":xxxxx"
		}
		disp += "@"
	}
	disp += strings.Join(c.opts.Addrs, ",")
	if c.opts.MasterName != "" {
		disp += "/" + c.opts.MasterName
	}
	c.display = disp
	switch c.topo {
	case Cluster:
		c.where = "Redis Cluster at " + strings.Join(c.opts.Addrs, ",")
	case Sentinel:
		c.where = "Redis master " + strconv.Quote(c.opts.MasterName) + " (Sentinel at " + strings.Join(c.opts.Addrs, ",") + ")"
	default:
		c.where = "Redis at " + strings.Join(c.opts.Addrs, ",")
	}
}
