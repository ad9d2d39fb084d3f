// Package redact shows store URLs and words from the command line in
// messages without what may be a secret in them: a password in a URL's user
// info, a SAS token in its query, a password mistyped outside the user
// info.
package redact

import (
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/internal/plainhost"
)

// Hidden stands for a value that cannot be shown safely.
const Hidden = "(not shown: it may hold a password)"

// URL returns a store URL as it may appear in a message: nothing that
// could be a credential survives, even in a URL mistyped so that a password
// lands outside the user info ("redis:/:PW@h", "redis://u:PW", "redis:PW@h").
// User info becomes "…@", a query "?…" (SAS tokens live there), a fragment is
// dropped, and the rest is shown only when every host is HOST[:PORT] with a
// numeric port and the path has no ':' or '@'; otherwise the whole value is
// "(not shown)". A bare absolute path is shown when it is plain.
func URL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if strings.HasPrefix(raw, "/") && PlainPath(raw) {
			return raw
		}
		return Hidden
	}
	if Word(scheme) == Hidden {
		return Hidden
	}
	rest, _, _ = strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	hostPart, path := rest, ""
	if i := strings.Index(rest, "/"); i >= 0 {
		hostPart, path = rest[:i], rest[i:]
	}
	userinfo := false
	if i := strings.LastIndex(hostPart, "@"); i >= 0 {
		hostPart, userinfo = hostPart[i+1:], true
	}
	if strings.Contains(path, "@") {
		return Hidden // user info after a '/' that should not be there
	}
	for _, h := range strings.Split(hostPart, ",") {
		if h != "" && !PlainHost(h) {
			return Hidden
		}
	}
	if !PlainPath(path) {
		return Hidden
	}
	if userinfo && strings.Trim(path, "0123456789/") != "" {
		path = "/…" // a URL with a password: show no more than a DB number
	}
	out := scheme + "://"
	if userinfo {
		out += "…@"
	}
	out += hostPart + path
	if hasQuery && query != "" {
		out += "?…"
	}
	return out
}

// Word quotes a scheme when it is a plain word, and hides it otherwise.
func Word(s string) string {
	if s == "" || len(s) > 20 {
		return Hidden
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
			return Hidden
		}
	}
	return strconv.Quote(s)
}

// PlainHost accepts NAME, NAME:PORT, [IPv6] and [IPv6]:PORT with a numeric
// port; a ':' followed by anything else may be a password.
func PlainHost(h string) bool {
	port, hasPort, ok := plainhost.Split(h)
	return ok && (!hasPort || port != "" && len(port) <= 5)
}

// PlainPath accepts a path of letters, digits and . _ - / ~ only.
func PlainPath(p string) bool {
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/~", r)) {
			return false
		}
	}
	return true
}
