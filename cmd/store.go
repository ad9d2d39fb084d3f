package cmd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
)

// storeOpeners maps a URL scheme to the opener of a store linked into this
// program: the file store always, others as Main's caller links them.
var storeOpeners = map[string]func(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error){"file": openFileStore}

// storeConfigError is a --store value no store accepts: its message is for
// people and it wraps lease.ErrConfig for classification.
type storeConfigError struct{ msg string }

func (e *storeConfigError) Error() string { return e.msg }
func (e *storeConfigError) Unwrap() error { return lease.ErrConfig }

// openStore picks the store for raw by its scheme. Its own messages show
// raw only through redactURL.
func openStore(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error) {
	shown := redactURL(raw)
	what := "--store " + strconv.Quote(shown)
	if shown == storeURLHidden {
		what = "--store (the value is not shown: it may hold a password)"
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		hint := "file:///var/lock/leaderrun or redis://host:6379"
		if strings.HasPrefix(raw, "/") && shown != storeURLHidden {
			hint = "file://" + shown
		}
		return nil, &storeConfigError{fmt.Sprintf("%s is not a URL: want scheme://…, e.g. %s", what, hint)}
	}
	open, ok := storeOpeners[strings.ToLower(scheme)]
	if !ok {
		msg := what + ": unknown scheme"
		if shown != storeURLHidden {
			msg += " " + shownWord(scheme)
		}
		return nil, &storeConfigError{msg + " (want " + knownSchemes + ")"}
	}
	return open(ctx, raw, o)
}

const storeURLHidden = "(not shown: it may hold a password)"

// redactURL returns a store URL as it may appear in a message: nothing that
// could be a credential survives, even in a URL mistyped so that a password
// lands outside the user info ("redis:/:PW@h", "redis://u:PW", "redis:PW@h").
// User info becomes "…@", a query "?…" (SAS tokens live there), a fragment is
// dropped, and the rest is shown only when every host is HOST[:PORT] with a
// numeric port and the path has no ':' or '@'; otherwise the whole value is
// "(not shown)". A bare absolute path is shown when it is plain.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if strings.HasPrefix(raw, "/") && plainPath(raw) {
			return raw
		}
		return storeURLHidden
	}
	if shownWord(scheme) == storeURLHidden {
		return storeURLHidden
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
		return storeURLHidden // user info after a '/' that should not be there
	}
	for _, h := range strings.Split(hostPart, ",") {
		if h != "" && !plainHost(h) {
			return storeURLHidden
		}
	}
	if !plainPath(path) {
		return storeURLHidden
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

// shownWord quotes a scheme when it is a plain word, and hides it otherwise.
func shownWord(s string) string {
	if s == "" || len(s) > 20 {
		return storeURLHidden
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.') {
			return storeURLHidden
		}
	}
	return strconv.Quote(s)
}

// plainHost accepts NAME, NAME:PORT, [IPv6] and [IPv6]:PORT with a numeric
// port; a ':' followed by anything else may be a password.
func plainHost(h string) bool {
	if strings.HasPrefix(h, "[") {
		end := strings.Index(h, "]")
		if end < 0 || strings.Trim(h[1:end], "0123456789abcdefABCDEF:.") != "" {
			return false
		}
		h = "x" + h[end+1:]
	}
	name, port, hasPort := strings.Cut(h, ":")
	if hasPort && (port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "") {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// plainPath accepts a path of letters, digits and . _ - / ~ only.
func plainPath(p string) bool {
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/~", r)) {
			return false
		}
	}
	return true
}
