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
func parseURL(raw string, getenv func(string) string) (*config, error) {
	fail := func(format string, args ...any) error {
		return storeerr.Config("bad Redis store URL: "+format, args...)
	}

	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fail("want scheme://…, e.g. redis://host:6379/0 (the URL is not shown: it may hold a password)")
	}
	scheme = strings.ToLower(scheme)
	tlsOn := strings.HasPrefix(scheme, "rediss")
	c := &config{topo: Single}
	switch scheme {
	case "redis", "rediss", "unix":
	case "redis+sentinel", "rediss+sentinel":
		c.topo = Sentinel
	case "redis+cluster", "rediss+cluster":
		c.topo = Cluster
	default:
		return nil, fail("unknown scheme %s (want one of %s)", storeurl.SafeKey(scheme), strings.Join(Schemes, ", "))
	}
	if strings.Contains(rest, "#") {
		return nil, fail("a fragment (#…) is not allowed; percent-encode '#' as %%23")
	}

	userinfo, hostPart, path, rawQuery := storeurl.Split(rest)

	var user, pass string
	hasPass := false
	if userinfo != "" {
		var err error
		user, pass, hasPass, err = storeurl.UserInfo(userinfo)
		if err != nil {
			return nil, fail("%v", err)
		}
	}
	if !hasPass {
		pass = getenv(EnvPassword)
	}
	c.opts.Username, c.opts.Password = user, pass
	if pass != "" {
		c.secrets = append(c.secrets, pass)
	}

	q, err := storeurl.Query(rawQuery)
	if err != nil {
		return nil, fail("%v", err)
	}
	for k := range q {
		switch k {
		case "db":
			if c.topo == Cluster {
				return nil, fail("Redis Cluster has only database 0; drop db=")
			}
		case "ca", "cert", "key", "servername":
			if !tlsOn {
				return nil, fail("%s= needs TLS: use a rediss… scheme", k)
			}
		case "sentinel_user":
			if c.topo != Sentinel {
				return nil, fail("sentinel_user= is for redis+sentinel:// URLs")
			}
		default:
			return nil, fail("unknown query parameter %s (known: db, ca, cert, key, servername, sentinel_user)", storeurl.QueryKey(k, rawQuery))
		}
	}

	db := -1
	setDB := func(s, where string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 1<<20 {
			return fail("bad database number in %s (want 0 to %d)", where, 1<<20)
		}
		if db >= 0 && db != n {
			return fail("database given twice (path and db=)")
		}
		db = n
		return nil
	}
	if v := q.Get("db"); v != "" {
		if err := setDB(v, "db="); err != nil {
			return nil, err
		}
	}

	defPort := "6379"
	if c.topo == Sentinel {
		defPort = "26379"
	}
	switch {
	case scheme == "unix":
		if hostPart != "" {
			return nil, fail("unix:// takes a socket path: unix:///path/to/redis.sock?db=N")
		}
		p, err := url.PathUnescape(path)
		if err != nil || p == "" || p == "/" {
			return nil, fail("unix:// needs a socket path: unix:///path/to/redis.sock?db=N")
		}
		c.opts.Addrs = []string{p} // go-redis dials "unix" for an address starting with '/'
	default:
		if hostPart == "" {
			return nil, fail("missing host")
		}
		for i, h := range strings.Split(hostPart, ",") {
			addr, err := storeurl.HostPort(h, defPort)
			if err != nil {
				return nil, fail("the %s host is not HOST[:PORT] with a port from 1 to 65535; it is not shown, since it may hold a password (a USER:PASSWORD must end with '@')", storeurl.Ordinal(i+1))
			}
			c.opts.Addrs = append(c.opts.Addrs, addr)
		}
		if c.topo == Single && len(c.opts.Addrs) > 1 {
			return nil, fail("several hosts: use redis+cluster://h1:p1,h2:p2 or redis+sentinel://s1,s2/master")
		}
		segs := strings.Split(strings.Trim(path, "/"), "/")
		if len(segs) == 1 && segs[0] == "" {
			segs = nil
		}
		switch c.topo {
		case Single:
			if len(segs) > 1 {
				return nil, fail("path must be /DB")
			}
			if len(segs) == 1 {
				if err := setDB(segs[0], "the path"); err != nil {
					return nil, err
				}
			}
		case Sentinel:
			if len(segs) < 1 || len(segs) > 2 {
				return nil, fail("Sentinel URLs are redis+sentinel://host:26379[,host:26379…]/MASTERNAME[/DB]")
			}
			name, err := url.PathUnescape(segs[0])
			if err != nil || name == "" {
				return nil, fail("bad master name")
			}
			c.opts.MasterName = name
			if len(segs) == 2 {
				if err := setDB(segs[1], "the path"); err != nil {
					return nil, err
				}
			}
			c.opts.SentinelUsername = q.Get("sentinel_user")
			c.opts.SentinelPassword = getenv(EnvSentinelPassword)
			if c.opts.SentinelPassword != "" {
				c.secrets = append(c.secrets, c.opts.SentinelPassword)
			}
		case Cluster:
			if len(segs) != 0 {
				return nil, fail("Cluster URLs have no path: redis+cluster://host:port[,host:port…]")
			}
			c.opts.IsClusterMode = true
		}
	}
	if db > 0 {
		c.opts.DB = db
	}

	if tlsOn {
		tc, err := storeurl.TLSConfig(q)
		if err != nil {
			return nil, fail("%v", err)
		}
		c.opts.TLSConfig = tc
	}

	disp := scheme + "://"
	if userinfo != "" {
		disp += url.PathEscape(user)
		if hasPass {
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
	return c, nil
}
