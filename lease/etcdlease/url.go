package etcdlease

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
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
		return configErr("bad etcd store URL: "+format, args...)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fail("want scheme://…, e.g. etcd://host:2379 (the URL is not shown: it may hold a password)")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "etcd" && scheme != "etcds" {
		return nil, fail("unknown scheme %s (want etcd or etcds)", safeKey(scheme))
	}
	tlsOn := scheme == "etcds"
	if strings.Contains(rest, "#") {
		return nil, fail("a fragment (#…) is not allowed; percent-encode '#' as %%23")
	}

	// User info ends at the last '@' before the query, so a password may hold
	// '/', ':' or '@' unencoded; '?' and '#' must be percent-encoded.
	beforeQuery, rawQuery, _ := strings.Cut(rest, "?")
	var userinfo string
	if i := strings.LastIndex(beforeQuery, "@"); i >= 0 {
		userinfo, beforeQuery = beforeQuery[:i], beforeQuery[i+1:]
	}
	hostPart, path := beforeQuery, ""
	if i := strings.Index(beforeQuery, "/"); i >= 0 {
		hostPart, path = beforeQuery[:i], beforeQuery[i:]
	}

	c := &config{}
	if userinfo != "" {
		u, p, has := strings.Cut(userinfo, ":")
		var err1, err2 error
		c.user, err1 = url.PathUnescape(u)
		c.pass, err2 = url.PathUnescape(p)
		if err1 != nil || err2 != nil {
			return nil, fail("bad percent-encoding in the user info")
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
			return nil, configErr("%s holds a password without a user name: want USER:PASSWORD", EnvUser)
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
		return nil, configErr("the etcd user is given without a password: put it in the URL (etcd://USER:PASSWORD@HOST), in %s=USER:PASSWORD or in %s", EnvUser, EnvPassword)
	}

	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fail("bad query string")
	}
	for k, v := range q {
		if len(v) != 1 {
			return nil, fail("query parameter %s given %d times", queryKey(k, rawQuery), len(v))
		}
		switch k {
		case "ca", "cert", "key", "servername":
			if !tlsOn {
				return nil, fail("%s= needs TLS: use etcds://", k)
			}
		default:
			return nil, fail("unknown query parameter %s (known: ca, cert, key, servername)", queryKey(k, rawQuery))
		}
	}

	if hostPart == "" {
		return nil, fail("missing host")
	}
	for i, h := range strings.Split(hostPart, ",") {
		addr, err := hostPort(h, "2379")
		if err != nil {
			return nil, fail("bad host:port (host %d; not shown; want HOST[:PORT] with a port from 1 to 65535, and '@' after any USER:PASSWORD)", i+1)
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
		tc, err := tlsConfig(q)
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

// queryKey shows a query key only when the query spells it KEY=…: a key
// without a value may be a password typed in the wrong place.
func queryKey(k, rawQuery string) string {
	for _, kv := range strings.Split(rawQuery, "&") {
		if name, _, ok := strings.Cut(kv, "="); ok && name == k {
			return safeKey(k)
		}
	}
	return "(not shown)"
}

// safeKey quotes a query key or scheme when it looks like a plain identifier
// and hides it otherwise (it might be a piece of a badly encoded password).
func safeKey(k string) string {
	for _, r := range k {
		if !(r == '_' || r == '+' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') || len(k) > 20 {
			return "(not shown)"
		}
	}
	return strconv.Quote(k)
}

// hostPort adds the default port when h has none and checks the result.
func hostPort(h, defPort string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty host")
	}
	if !strings.Contains(h, ":") || strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = net.JoinHostPort(strings.Trim(h, "[]"), defPort)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(port)
	if host == "" || err != nil || n < 1 || n > 65535 || strings.ContainsAny(host, "/@?#% ") {
		return "", fmt.Errorf("bad host or port")
	}
	return net.JoinHostPort(host, port), nil
}

// tlsConfig builds the client TLS settings from ca=, cert=, key= and
// servername=. Without ca= the system roots are used.
func tlsConfig(q url.Values) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: q.Get("servername")}
	if ca := q.Get("ca"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ca=: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca=%s: no PEM certificates found", ca)
		}
		tc.RootCAs = pool
	}
	cert, key := q.Get("cert"), q.Get("key")
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("cert= and key= go together")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("cert=/key=: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
