// Package storeurl holds the store-URL parsing pieces that the network
// stores (redislease, etcdlease, pglease) share: echoing a query key or
// scheme only when it cannot be part of a password, host:port checking and
// the ca=/cert=/key=/servername= TLS settings. Nothing here ever puts the
// URL's text into an error: a typo can put a password anywhere in it.
//
// It imports net and crypto/tls, so the file store and the base program
// must not import it.
package storeurl

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/internal/safefile"
)

// Hidden is what QueryKey and SafeKey show instead of a key that might be
// part of a password.
const Hidden = "(not shown)"

// QueryKey shows query key k (quoted, see SafeKey) only when rawQuery spells
// it KEY=…: a key without a value may be a password typed in the wrong place.
func QueryKey(k, rawQuery string) string {
	for _, kv := range strings.Split(rawQuery, "&") {
		if name, _, ok := strings.Cut(kv, "="); ok && name == k {
			return SafeKey(k)
		}
	}
	return Hidden
}

// SafeKey quotes a query key or scheme when it looks like a plain identifier
// (letters, digits, '_' and '+', at most 20 bytes) and hides it otherwise
// (it might be a piece of a badly encoded password).
func SafeKey(k string) string {
	for _, r := range k {
		if !(r == '_' || r == '+' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') || len(k) > 20 {
			return Hidden
		}
	}
	return strconv.Quote(k)
}

// HostPort adds defPort when h has none ("host", "[::1]") and checks the
// result: a non-empty host and a port in 1-65535. It returns host:port as
// net.JoinHostPort writes it. Its errors never contain h.
func HostPort(h, defPort string) (string, error) {
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
	if host == "" || err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("bad host or port")
	}
	return net.JoinHostPort(host, port), nil
}

// TLSConfig builds client TLS settings (TLS 1.2 or later) from the query
// parameters ca= (a PEM file of roots; without it the system roots are
// used), cert= and key= (a client certificate; both or neither) and
// servername= (the name to verify instead of the host's).
func TLSConfig(q url.Values) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: q.Get("servername")}
	if ca := q.Get("ca"); ca != "" {
		pem, err := safefile.Read(ca)
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
		certPEM, err := safefile.Read(cert)
		if err != nil {
			return nil, fmt.Errorf("cert=: %w", err)
		}
		keyPEM, err := safefile.Read(key)
		if err != nil {
			return nil, fmt.Errorf("key=: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("cert=/key=: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// Split cuts what follows a store URL's "scheme://" into its user info, host
// list, path (with its leading '/', or "") and raw query. The user info ends
// at the last '@' before the query, so a password may hold '/', ':' or '@'
// unencoded; '?' and '#' must be percent-encoded.
func Split(rest string) (userinfo, hosts, path, rawQuery string) {
	beforeQuery, rawQuery, _ := strings.Cut(rest, "?")
	if i := strings.LastIndex(beforeQuery, "@"); i >= 0 {
		userinfo, beforeQuery = beforeQuery[:i], beforeQuery[i+1:]
	}
	hosts = beforeQuery
	if i := strings.Index(beforeQuery, "/"); i >= 0 {
		hosts, path = beforeQuery[:i], beforeQuery[i:]
	}
	return userinfo, hosts, path, rawQuery
}

// UserInfo decodes USER[:PASSWORD] (percent-encoded). hasPass tells a
// password given, even empty, from none. Its error never contains either.
func UserInfo(userinfo string) (user, pass string, hasPass bool, err error) {
	u, p, has := strings.Cut(userinfo, ":")
	user, err1 := url.PathUnescape(u)
	pass, err2 := url.PathUnescape(p)
	if err1 != nil || err2 != nil {
		return "", "", false, fmt.Errorf("bad percent-encoding in the user info")
	}
	return user, pass, has, nil
}

// Query parses rawQuery and checks that every key is given once. Its errors
// name a key only as QueryKey shows it.
func Query(rawQuery string) (url.Values, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("bad query string")
	}
	for k, v := range q {
		if len(v) != 1 {
			return nil, fmt.Errorf("query parameter %s given %d times", QueryKey(k, rawQuery), len(v))
		}
	}
	return q, nil
}

// Ordinal names the n-th item of a list for messages: "first", "second",
// …, "10th", "21st".
func Ordinal(n int) string {
	words := []string{"first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"}
	if n >= 1 && n <= len(words) {
		return words[n-1]
	}
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}
