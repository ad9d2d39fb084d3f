package etcdlease

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeurl"
)

// Schemes lists every URL scheme Open accepts: etcd (plain gRPC) and etcds
// (TLS).
var Schemes = []string{"etcd", "etcds"}

// EnvUser is read for USER[:PASSWORD] when the URL carries no user (the
// variable etcdctl reads for --user).
const EnvUser = "ETCDCTL_USER"

// EnvPassword is read for the password when a user is given without one
// (the variable etcdctl reads for --password).
const EnvPassword = "ETCDCTL_PASSWORD"

// DefaultPrefix is the key prefix when the URL has no path: the lease NAME
// lives at the key leaderrun/NAME.
const DefaultPrefix = "leaderrun/"

// config is a parsed store URL.
type config struct {
	endpoints  []string // host:port
	prefix     string   // key prefix, ends with '/'
	user, pass string
	tls        *tls.Config
	display    string   // the URL with the password masked, for messages
	where      string   // the cluster for people: "etcd at 127.0.0.1:2379"
	secrets    []string // passwords to keep out of every message
}

// parseURL turns a store URL into client settings. Its errors wrap
// lease.ErrConfig and never contain the password or anything that could be
// one: they name the part that is wrong and never echo the URL's text (a
// typo can put a password anywhere, e.g. "etcd:/:PW@h" or "etcd://u:PW").
func parseURL(raw string, getenv func(string) string) (*config, error) {
	fail := func(format string, args ...any) error {
		return storeerr.Config("bad etcd store URL: "+format, args...)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fail("want scheme://…, e.g. etcd://host:2379 (the URL is not shown: it may hold a password)")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "etcd" && scheme != "etcds" {
		return nil, fail("unknown scheme %s (want etcd or etcds)", storeurl.SafeKey(scheme))
	}
	tlsOn := scheme == "etcds"
	if strings.Contains(rest, "#") {
		return nil, fail("a fragment (#…) is not allowed; percent-encode '#' as %%23")
	}

	userinfo, hostPart, path, rawQuery := storeurl.Split(rest)

	c := &config{}
	if userinfo != "" {
		var has bool
		var err error
		c.user, c.pass, has, err = storeurl.UserInfo(userinfo)
		if err != nil {
			return nil, fail("%v", err)
		}
		if c.user == "" {
			return nil, fail("a password without a user name: etcd://USER:PASSWORD@HOST")
		}
		if !has {
			c.pass = getenv(EnvPassword)
		}
	} else if v := getenv(EnvUser); v != "" {
		u, p, has := strings.Cut(v, ":")
		if u == "" {
			return nil, storeerr.Config("%s holds a password without a user name: want USER:PASSWORD", EnvUser)
		}
		c.user, c.pass = u, p
		if !has {
			c.pass = getenv(EnvPassword)
		}
	}
	if c.pass != "" {
		c.secrets = append(c.secrets, c.pass)
	}
	if c.user != "" && c.pass == "" {
		return nil, storeerr.Config("the etcd user is given without a password: put it in the URL (etcd://USER:PASSWORD@HOST), in %s=USER:PASSWORD or in %s", EnvUser, EnvPassword)
	}

	q, err := storeurl.Query(rawQuery)
	if err != nil {
		return nil, fail("%v", err)
	}
	for k := range q {
		switch k {
		case "ca", "cert", "key", "servername":
			if !tlsOn {
				return nil, fail("%s= needs TLS: use etcds://", k)
			}
		default:
			return nil, fail("unknown query parameter %s (known: ca, cert, key, servername)", storeurl.QueryKey(k, rawQuery))
		}
	}

	if hostPart == "" {
		return nil, fail("missing host")
	}
	for i, h := range strings.Split(hostPart, ",") {
		addr, err := hostPort(h)
		if err != nil {
			return nil, fail("the %s host is not HOST[:PORT] with a port from 1 to 65535; it is not shown, since it may hold a password (a USER:PASSWORD must end with '@')", storeurl.Ordinal(i+1))
		}
		c.endpoints = append(c.endpoints, addr)
	}

	c.prefix = DefaultPrefix
	if p := strings.Trim(path, "/"); p != "" {
		dec, err := url.PathUnescape(p)
		if err != nil || !plainPrefix(dec) {
			return nil, fail("bad key prefix (the path; not shown): use letters, digits, '.', '_', '-' and '/'")
		}
		c.prefix = dec + "/"
	}

	if tlsOn {
		tc, err := storeurl.TLSConfig(q)
		if err != nil {
			return nil, fail("%v", err)
		}
		c.tls = tc
	}

	disp := scheme + "://"
	if userinfo != "" {
		disp += url.PathEscape(c.user) + ":xxxxx@"
	}
	disp += strings.Join(c.endpoints, ",")
	if c.prefix != DefaultPrefix {
		disp += "/" + strings.TrimSuffix(c.prefix, "/")
	}
	c.display = disp
	c.where = "etcd at " + strings.Join(c.endpoints, ",")
	return c, nil
}

// plainPrefix accepts a key prefix made of the lease-name alphabet, with no
// empty, '.' or '..' element.
func plainPrefix(p string) bool {
	if len(p) > 200 {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return true
}

// hostPort is storeurl.HostPort with etcd's default port, refusing also a
// host with characters no host name has ('/', '@', '?', '#', '%', ' '): the
// gRPC target would read them otherwise.
func hostPort(h string) (string, error) {
	addr, err := storeurl.HostPort(h, "2379")
	if err != nil {
		return "", err
	}
	if host, _, _ := net.SplitHostPort(addr); strings.ContainsAny(host, "/@?#% ") {
		return "", fmt.Errorf("bad host or port")
	}
	return addr, nil
}
