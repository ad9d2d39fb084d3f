package cmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
)

// storeOpeners maps a URL scheme to the opener of a store linked into this
// program: the file store always, others as Main's caller links them.
var storeOpeners = map[string]func(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error){"file": openFileStore}

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
		if sug := suggestStore(raw); sug != "" {
			if !strings.Contains(sug, "…") {
				// The whole suggestion can be shown, so can the value.
				what = "--store " + strconv.Quote(raw)
			}
			return nil, lease.NewError(fmt.Sprintf("%s is not a URL; did you mean %s?", what, sug), lease.ErrConfig)
		}
		return nil, lease.NewError(fmt.Sprintf("%s is not a URL: want scheme://…, e.g. file:///var/lock/leaderrun or redis://host:6379", what), lease.ErrConfig)
	}
	open, ok := storeOpeners[strings.ToLower(scheme)]
	if !ok {
		msg := what + ": unknown scheme"
		if shown != storeURLHidden {
			msg += " " + shownWord(scheme)
		}
		if sug := suggestStore(raw); sug != "" {
			return nil, lease.NewError(msg+"; did you mean "+sug+"?", lease.ErrConfig)
		}
		return nil, lease.NewError(msg+" (want "+knownSchemes+")", lease.ErrConfig)
	}
	return open(ctx, raw, o)
}

// suggestStore returns what a --store value that is not a URL of a known
// scheme was likely meant to be, or "" when nothing is near: a known
// scheme for a near miss of one (reddis:// → redis://), "://" after a known
// scheme that lacks it (redis:host:6379, file:/var/lock/x), file:// before
// an absolute path, and for HOST:PORT the store usually found on that port
// (etcd on 2379, PostgreSQL on 5432, else Redis, the store most often
// written that way). The suggestion is the whole URL when every part of it
// can be shown (redactURL leaves it as it is), else only its scheme
// ("redis://…"): it never shows what could be a secret.
func suggestStore(raw string) string {
	fixed := ""
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		if near := nearestScheme(scheme); near != "" {
			fixed = near + "://" + rest
		}
	} else if scheme, rest, ok := cutKnownScheme(raw); ok {
		rest = strings.TrimLeft(rest, "/")
		if scheme == "file" || scheme == "unix" {
			rest = "/" + rest // a path: file:///var/lock/x
		}
		fixed = scheme + "://" + rest
	} else if strings.HasPrefix(raw, "/") && plainPath(raw) {
		fixed = "file://" + raw
	} else if hostPort(raw) {
		scheme := "redis"
		switch _, port, _ := strings.Cut(strings.SplitN(raw, "/", 2)[0], ":"); port {
		case "2379":
			scheme = "etcd"
		case "5432":
			scheme = "postgres"
		}
		fixed = scheme + "://" + raw
	}
	if fixed == "" {
		return ""
	}
	if redactURL(fixed) == fixed {
		return fixed
	}
	scheme, _, _ := strings.Cut(fixed, "://")
	return scheme + "://…"
}

// nearestScheme returns the known scheme nearest to scheme (within a third
// of its length, at least one edit), or "" when none is that near.
func nearestScheme(scheme string) string {
	scheme = strings.ToLower(scheme)
	if shownWord(scheme) == storeURLHidden {
		return ""
	}
	best, bestD := "", 0
	for _, k := range knownSchemeList() {
		if d := editDistance(scheme, k); best == "" || d < bestD || d == bestD && k < best {
			best, bestD = k, d
		}
	}
	if best != "" && bestD > 0 && bestD <= max(1, len(scheme)/3) {
		return best
	}
	return ""
}

// cutKnownScheme splits a value written as a known scheme followed by ':'
// or "//" but not "://" (redis:host:6379, redis//host, file:/x).
func cutKnownScheme(raw string) (scheme, rest string, ok bool) {
	for _, k := range knownSchemeList() {
		if len(raw) <= len(k) || !strings.EqualFold(raw[:len(k)], k) {
			continue
		}
		switch r := raw[len(k):]; {
		case strings.HasPrefix(r, ":"):
			return k, r[1:], true
		case strings.HasPrefix(r, "//"):
			return k, r[2:], true
		}
	}
	return "", "", false
}

// hostPort reports whether raw is HOST:PORT (a name or address and a
// numeric port), optionally followed by a plain path such as a database
// number (/0).
func hostPort(raw string) bool {
	host, path, _ := strings.Cut(raw, "/")
	_, port, ok := strings.Cut(host, ":")
	if strings.HasPrefix(host, "[") {
		_, port, ok = strings.Cut(host, "]:")
	}
	return ok && port != "" && plainHost(host) && plainPath(path)
}

// knownSchemeList is every scheme leaderrun serves, linked or not.
func knownSchemeList() []string {
	out := []string{"file"}
	for s := range drivers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
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
