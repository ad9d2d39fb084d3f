package cmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/internal/redact"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/storetab"
)

// storeOpeners maps a URL scheme to the opener of a store linked into this
// program: the file store always, others as Main's caller links them. An
// opener's own messages name the flag with spell.
var storeOpeners = map[string]opener{"file": openFileStore}

// opener opens the store of URL raw; spell names the flag in its messages.
type opener func(ctx context.Context, raw string, spell lease.FlagSpeller, o lease.OpenOptions) (lease.Store, error)

// openStore picks the store for raw by its scheme. Its own messages show
// raw only through redactURL, and name the flag with spell.
func openStore(ctx context.Context, raw string, spell lease.FlagSpeller, o lease.OpenOptions) (lease.Store, error) {
	shown := redact.URL(raw)
	what := spell("store", strconv.Quote(shown))
	if shown == redact.Hidden {
		what = spell("store", "") + " (the value is not shown: it may hold a password)"
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		if sug := suggestStore(raw); sug != "" {
			if !strings.Contains(sug, "…") {
				// The whole suggestion can be shown, so can the value.
				what = spell("store", strconv.Quote(raw))
			}
			return nil, lease.NewError(fmt.Sprintf("%s is not a URL; did you mean %s?", what, sug), lease.ErrConfig)
		}
		return nil, lease.NewError(fmt.Sprintf("%s is not a URL: want scheme://…, e.g. file:///var/lock/leaderrun or redis://host:6379", what), lease.ErrConfig)
	}
	open, ok := storeOpeners[strings.ToLower(scheme)]
	if !ok {
		msg := what + ": unknown scheme"
		if shown != redact.Hidden {
			msg += " " + redact.Word(scheme)
		}
		if sug := suggestStore(raw); sug != "" {
			return nil, lease.NewError(msg+"; did you mean "+sug+"?", lease.ErrConfig)
		}
		return nil, lease.NewError(msg+" (want "+knownSchemes()+")", lease.ErrConfig)
	}
	return open(ctx, raw, spell, o)
}

// suggestStore returns what a --store value that is not a URL of a known
// scheme was likely meant to be, or "" when nothing is near: a known
// scheme for a near miss of one (reddis:// → redis://), "://" after a known
// scheme that lacks it (redis:host:6379, file:/var/lock/x), file:// before
// an absolute path, and for HOST:PORT the store usually found on that port
// (storetab.ForPort: etcd on 2379, PostgreSQL on 5432, else Redis). The suggestion is the whole URL when every part of it
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
	} else if strings.HasPrefix(raw, "/") && redact.PlainPath(raw) {
		fixed = "file://" + raw
	} else if hostPort(raw) {
		_, port, _ := strings.Cut(strings.SplitN(raw, "/", 2)[0], ":")
		if r, ok := storetab.ForPort(port); ok {
			fixed = r.Schemes[0] + "://" + raw
		}
	}
	if fixed == "" {
		return ""
	}
	if redact.URL(fixed) == fixed {
		return fixed
	}
	scheme, _, _ := strings.Cut(fixed, "://")
	return scheme + "://…"
}

// nearestScheme returns the known scheme nearest to scheme (within a third
// of its length, at least one edit), or "" when none is that near.
func nearestScheme(scheme string) string {
	scheme = strings.ToLower(scheme)
	if redact.Word(scheme) == redact.Hidden {
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
	return ok && port != "" && redact.PlainHost(host) && redact.PlainPath(path)
}

// knownSchemeList is every scheme leaderrun serves, linked or not, sorted.
func knownSchemeList() []string {
	return slices.Sorted(slices.Values(storetab.Schemes()))
}
