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
// It works in steps: the scheme, the user and password, the query
// parameters, the hosts, the key prefix, TLS, then the text for people.
func parseURL(raw string, getenv func(string) string) (*config, error) {
	scheme, rest, err := parseScheme(raw)
	if err != nil {
		return nil, err
	}
	tlsOn := scheme == "etcds"
	userinfo, hostPart, path, rawQuery := storeurl.Split(rest)
	c := &config{}
	if err := c.credentials(userinfo, getenv); err != nil {
		return nil, err
	}
	q, err := parseParams(rawQuery, tlsOn)
	if err != nil {
		return nil, err
	}
	if err := c.hosts(hostPart); err != nil {
		return nil, err
	}
	if err := c.keyPrefix(path); err != nil {
		return nil, err
	}
	if tlsOn {
		if c.tls, err = storeurl.TLSConfig(q); err != nil {
			return nil, badURL("%v", err)
		}
	}
	c.describe(scheme, userinfo != "")
	return c, nil
}

// badURL returns a store URL error; format and args must never carry the
// URL's text or a password.
func badURL(format string, args ...any) error {
	return storeerr.Config("bad etcd store URL: "+format, args...)
}

// parseScheme returns the lower-case scheme and the URL after "://",
// refusing an unknown scheme and a fragment.
func parseScheme(raw string) (scheme, rest string, err error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", badURL("want scheme://…, e.g. etcd://host:2379 (the URL is not shown: it may hold a password)")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "etcd" && scheme != "etcds" {
		return "", "", badURL("unknown scheme %s (want etcd or etcds)", storeurl.SafeKey(scheme))
	}
	if strings.Contains(rest, "#") {
		return "", "", badURL("a fragment (#…) is not allowed; percent-encode '#' as %%23")
	}
	return scheme, rest, nil
}

// credentials sets the user and password from the URL's user info, else
// from EnvUser, the password from EnvPassword when neither gives one; a
// user needs a password.
func (c *config) credentials(userinfo string, getenv func(string) string) error {
	if userinfo != "" {
		var has bool
		var err error
		c.user, c.pass, has, err = storeurl.UserInfo(userinfo)
		if err != nil {
			return badURL("%v", err)
		}
		if c.user == "" {
			return badURL("a password without a user name: etcd://USER:PASSWORD@HOST")
		}
		if !has {
			c.pass = getenv(EnvPassword)
		}
	} else if v := getenv(EnvUser); v != "" {
		u, p, has := strings.Cut(v, ":")
		if u == "" {
			return storeerr.Config("%s holds a password without a user name: want USER:PASSWORD", EnvUser)
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
		return storeerr.Config("the etcd user is given without a password: put it in the URL (etcd://USER:PASSWORD@HOST), in %s=USER:PASSWORD or in %s", EnvUser, EnvPassword)
	}
	return nil
}

// parseParams parses the query, refusing an unknown parameter and a TLS
// one without TLS.
func parseParams(rawQuery string, tlsOn bool) (url.Values, error) {
	q, err := storeurl.Query(rawQuery)
	if err != nil {
		return nil, badURL("%v", err)
	}
	for k := range q {
		switch k {
		case "ca", "cert", "key", "servername":
			if !tlsOn {
				return nil, badURL("%s= needs TLS: use etcds://", k)
			}
		default:
			return nil, badURL("unknown query parameter %s (known: ca, cert, key, servername)", storeurl.QueryKey(k, rawQuery))
		}
	}
	return q, nil
}

// hosts sets the endpoints from the comma-separated HOST[:PORT] list.
func (c *config) hosts(hostPart string) error {
	if hostPart == "" {
		return badURL("missing host")
	}
	for i, h := range strings.Split(hostPart, ",") {
		addr, err := hostPort(h)
		if err != nil {
			return badURL("the %s host is not HOST[:PORT] with a port from 1 to 65535; it is not shown, since it may hold a password (a USER:PASSWORD must end with '@')", storeurl.Ordinal(i+1))
		}
		c.endpoints = append(c.endpoints, addr)
	}
	return nil
}

// keyPrefix sets the key prefix from the path, DefaultPrefix when it is
// empty.
func (c *config) keyPrefix(path string) error {
	c.prefix = DefaultPrefix
	if p := strings.Trim(path, "/"); p != "" {
		dec, err := url.PathUnescape(p)
		if err != nil || !plainPrefix(dec) {
			return badURL("bad key prefix (the path; not shown): use letters, digits, '.', '_', '-' and '/'")
		}
		c.prefix = dec + "/"
	}
	return nil
}

// describe sets the display URL, with the password masked (hasUser: the URL
// has user info), and the cluster for people.
func (c *config) describe(scheme string, hasUser bool) {
	disp := scheme + "://"
	if hasUser {
		disp += url.PathEscape(c.user) + ":xxxxx@"
	}
	disp += strings.Join(c.endpoints, ",")
	if c.prefix != DefaultPrefix {
		disp += "/" + strings.TrimSuffix(c.prefix, "/")
	}
	c.display = disp
	c.where = "etcd at " + strings.Join(c.endpoints, ",")
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
