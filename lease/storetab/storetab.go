// Package storetab is the table of leaderrun's stores: one Row per store,
// holding what the command line, its help, the man page, the completions
// and the docs say about it (schemes, program, TTL limits, watching, δ,
// secrets). It is data only and imports no store package, so that the
// leaderrun program, which links the file store alone, can describe every
// store without linking their clients.
//
// Each store package has a test that holds its row to the store's own code
// (storetab/rowtest): a row cannot drift from what the store does. Adding
// a store is a file here with its Row and one line in rows.
package storetab

import (
	"strconv"
	"strings"
	"time"
)

// Row describes one store.
type Row struct {
	// Name is how help and messages name the store: "file", "Redis",
	// "Azure".
	Name string
	// Schemes are the URL schemes the store's Open accepts, lower case;
	// the first is its own, the one messages and help name first.
	Schemes []string
	// Form is the URL form --store's usage shows: "redis://host:port".
	Form string
	// Local is true for a store that excludes the processes of one host
	// only (the file store).
	Local bool
	// Program is the program that links the store: leaderrun for the
	// file store, which every program links; cmd/leaderrun-*/ for the
	// others, to which leaderrun hands a run on their schemes.
	Program string
	// Package is the import path of the store's package.
	Package string
	// Port is the TCP port the store is usually found on, where a
	// HOST:PORT written without a scheme is likely meant for it; 0 when a
	// URL of the store names no port that way.
	Port int
	// Expires, MinTTL, MaxTTL and TTLUnit are the store's lease.Limits:
	// whether its leases expire, the TTLs it accepts (zero: no bound of
	// its own) and the unit every TTL is a whole multiple of.
	Expires                 bool
	MinTTL, MaxTTL, TTLUnit time.Duration
	// Watches is true when the store tells a watcher of changes as they
	// happen (lease.ChangeWatcher); the others are polled.
	Watches bool
	// Poll is how often a waiter looks at a held lease by default when the
	// store has no way to wake it (Azure); zero when the store wakes its
	// waiters.
	Poll time.Duration
	// Step is the store's default δ, the priority step
	// (lease.CandidateTiming.Step).
	Step time.Duration
	// SecretVars are the environment variables the store reads a
	// credential from.
	SecretVars []string
}

// Doc is the address of the store package's documentation.
func (r Row) Doc() string { return "https://pkg.go.dev/" + r.Package }

// Linked reports whether every leaderrun program links the store (the
// file store), so that no run of it is handed to another program.
func (r Row) Linked() bool { return r.Program == Leaderrun }

// Leaderrun is the name of the program that links the file store alone.
const Leaderrun = "leaderrun"

// rows is the table, in the order help lists the stores. (Pointers to the
// rows, so that the linker lays the table out: no initialiser runs at
// start-up.)
var rows = []*Row{&file, &redis, &postgres, &mysql, &etcd, &azblob, &kubernetes, &s3, &gcs}

// All returns every row in the order help lists them. The caller must not
// modify them.
func All() []*Row { return rows }

// ByScheme returns the row of the store that serves scheme (any case).
func ByScheme(scheme string) (Row, bool) {
	for _, r := range rows {
		for _, s := range r.Schemes {
			if strings.EqualFold(s, scheme) {
				return *r, true
			}
		}
	}
	return Row{}, false
}

// ByName returns the row whose Name is name.
func ByName(name string) (Row, bool) {
	for _, r := range rows {
		if r.Name == name {
			return *r, true
		}
	}
	return Row{}, false
}

// Schemes returns every scheme of every store, in table order.
func Schemes() []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Schemes...)
	}
	return out
}

// ForPort returns the store a HOST:PORT written without a scheme most
// likely names: the one usually found on port, else the first row with a
// port (Redis, the store most often written that way).
func ForPort(port string) (Row, bool) {
	var first *Row
	for _, r := range rows {
		if r.Port == 0 {
			continue
		}
		if strconv.Itoa(r.Port) == port {
			return *r, true
		}
		if first == nil {
			first = r
		}
	}
	if first == nil {
		return Row{}, false
	}
	return *first, true
}
