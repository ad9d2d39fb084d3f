package cmd

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/dispatch"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/storetab"
)

// LinkedStore is a store linked into this program: the URL schemes it serves and
// its opener. The leaderrun program links only the file store; each other
// store lives in a program of its own (drivers), so that a run pays the
// start-up cost of exactly the store it uses (the Azure, etcd and
// PostgreSQL clients alone take milliseconds to initialise; see
// docs/performance.md).
type LinkedStore struct {
	// Schemes are the URL schemes, lower case.
	Schemes []string
	// Open opens the store named by a --store URL. It must never put a
	// secret from raw into an error. o.CallTimeout bounds one store call
	// (docs/design.md, safety rule 4); o.Getenv is Main's environment.
	Open func(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error)
}

// Link makes the LinkedStore of a store package from its schemes and its
// Open.
func Link[S lease.Store](schemes []string, open func(ctx context.Context, raw string, o lease.OpenOptions) (S, error)) LinkedStore {
	return LinkedStore{Schemes: schemes, Open: func(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error) {
		s, err := open(ctx, raw, o)
		if err != nil {
			return nil, err // not s: a nil *Store in a lease.Store is not nil
		}
		return s, nil
	}}
}

// driverOf names the program that serves scheme when this program may not
// link it (storetab: every store but the file store has a program of its
// own, cmd/leaderrun-*/); ok is false for a scheme no store serves and for
// the file store's. `go build -o DIR/ . ./cmd/...` in a clone builds them
// all next to leaderrun, as the packages install them.
func driverOf(scheme string) (prog string, ok bool) {
	r, ok := storetab.ByScheme(scheme)
	if !ok || r.Linked() {
		return "", false
	}
	return r.Program, true
}

// knownSchemes lists every scheme for messages, linked or not: "file,
// redis, … or kubernetes".
func knownSchemes() string {
	return orList(storetab.Schemes())
}

// orList joins words as "a, b or c".
func orList(words []string) string { return joinLast(words, " or ") }

// andList joins words as "a, b and c".
func andList(words []string) string { return joinLast(words, " and ") }

func joinLast(words []string, last string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + last + words[len(words)-1]
}

// The help texts below say what storetab says of the stores, so that a
// store's row is the one place they learn of it.

// storeUsage is --store's usage: every store's URL form and schemes.
func storeUsage() string {
	var local, shared []string
	for _, r := range storetab.All() {
		form := r.Form
		if len(r.Schemes) > 1 {
			var also []string
			for _, s := range r.Schemes[1:] {
				also = append(also, s+"://")
			}
			form += " (also " + strings.Join(also, ", ") + ")"
		}
		if r.Local {
			local = append(local, form+" (excludes processes of one host only)")
		} else {
			shared = append(shared, form)
		}
	}
	return "where the lease lives, a `URL`: " + strings.Join(local, ", ") + ", or a store every host reaches: " + strings.Join(shared, ", ")
}

// ttlUsage is --ttl's usage, with the limits of the stores that take
// whole seconds or bound the TTL (the others take any TTL from their
// shortest, a fraction of --ttl's smallest sensible value).
func ttlUsage() string {
	var limits []string
	for _, r := range storetab.All() {
		if r.TTLUnit < time.Second && r.MaxTTL == 0 {
			continue
		}
		l := r.Schemes[0] + ": "
		if r.TTLUnit == time.Second {
			l += "whole seconds, "
		}
		if r.MaxTTL > 0 {
			l += seconds(r.MinTTL) + "-" + seconds(r.MaxTTL)
		} else {
			l += seconds(r.MinTTL) + " up"
		}
		limits = append(limits, l)
	}
	return "lease `DURATION` in the store: how long a crashed holder blocks others (" + strings.Join(limits, "; ") + ")"
}

// seconds writes d as help writes a TTL limit: 60s, not 1m.
func seconds(d time.Duration) string {
	if d%time.Second == 0 && d < time.Hour {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	return lease.FormatDuration(d)
}

// priorityStepUsage is --priority-step's usage, with each store's δ.
func priorityStepUsage() string {
	var steps []time.Duration
	for _, r := range storetab.All() {
		if !slices.Contains(steps, r.Step) {
			steps = append(steps, r.Step)
		}
	}
	slices.Sort(steps)
	var parts []string
	for _, d := range steps {
		var names []string
		for _, r := range storetab.All() {
			if r.Step == d {
				names = append(names, r.Name)
			}
		}
		parts = append(parts, lease.FormatDuration(d)+" on "+andList(names))
	}
	return "when the lease becomes free, hold back `D` for each live standby ranked above this one before trying (the store's δ by default: " + strings.Join(parts, ", ") + "); raise it where standbys may be slow to notice a release, so that the order holds"
}

// watchingStores names the stores that tell a watcher of changes (or, with
// watching false, those that are polled).
func watchingStores(watching bool) []string {
	var names []string
	for _, r := range storetab.All() {
		if r.Watches == watching {
			names = append(names, r.Name)
		}
	}
	return names
}

// intervalUsage is watch --interval's usage.
func intervalUsage() string {
	return "how often to look, a `DURATION` of at least 10ms (" + andList(watchingStores(true)) + " report changes as they happen; this is their fallback)"
}

// watchStoresText is the paragraph of watch's description on how it
// learns of changes, wrapped as the rest of it is.
func watchStoresText() string {
	return wrapText("The "+andList(watchingStores(true))+" stores report changes as they happen (within 100ms) and are polled every --interval only as a fallback; "+
		andList(watchingStores(false))+" are polled every --interval (jittered). --once prints only the next change, then exits 0.", 75)
}

// wrapText breaks s into lines of at most width bytes at spaces.
func wrapText(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// register links stores into this program.
func register(stores []LinkedStore) {
	for _, s := range stores {
		open := s.Open // its messages do not name the flag
		for _, scheme := range s.Schemes {
			storeOpeners[scheme] = func(ctx context.Context, raw string, _ lease.FlagSpeller, o lease.OpenOptions) (lease.Store, error) {
				return open(ctx, raw, o)
			}
		}
	}
}

// dispatch hands the whole run to the program that serves raw's scheme when
// this one does not link it (dispatch.Exec): it returns only on failure,
// and nil when this program serves raw. The arguments and environment are
// Main's, e.argv and e.environ().
func (e env) dispatch(raw string) error {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil // openStore explains
	}
	scheme = strings.ToLower(scheme)
	if _, linked := storeOpeners[scheme]; linked {
		return nil
	}
	prog, ok := driverOf(scheme)
	if !ok {
		return nil // openStore says the scheme is unknown
	}
	return dispatch.Exec(scheme, prog, e.argv, e.environ(), e.origin.Dispatched)
}
