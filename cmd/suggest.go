package cmd

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/leaderrun/leaderrun/internal/dispatch"
	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/storetab"
)

// Mistyped names: a flag, a LEADERRUN_* variable or a command close to one
// leaderrun knows is refused (or warned of) with the one it most likely
// meant, by editDistance (optimal string alignment, within a third of the
// name).

// dashes writes a flag name as the user would: -n, --ttl.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// ownerOf names the form(s) that do take flag name, for messages.
func ownerOf(name string, scopes []scope) string {
	var owners []string
	for _, s := range scopes {
		if _, ok := s.flags[name]; ok {
			owners = append(owners, s.describe())
		}
	}
	return strings.Join(owners, " and ")
}

// unknownFlag refuses a flag no scope knows, suggesting the nearest one.
func unknownFlag(token, name string, within scope, scopes []scope) error {
	for _, s := range scopes {
		if _, ok := s.flags[name]; ok {
			return usagef("%s does not take %s; it is a flag of %s", within.describe(), dashes(name), ownerOf(name, scopes))
		}
	}
	var long []string
	for n := range within.flags {
		if len(n) > 1 {
			long = append(long, n)
		}
	}
	if best := nearest(strings.ToLower(name), long, min(2, max(1, len(name)/3))); best != "" {
		return usagef("unknown flag %s; did you mean --%s?", token, best)
	}
	return usagef("unknown flag %s", token)
}

// editDistance is the optimal-string-alignment distance (Levenshtein plus
// transpositions) between a and b.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// otherVars are the LEADERRUN_* variables that are neither a flag's nor a
// store's (run.SecretVars): those leaderrun gives its child (childenv.go), and
// the one the dispatch reads.
var otherVars = []string{envLease, envLeaseHolder, envLeaseToken, envTokenDeprecated,
	dispatch.EnvGuardProgram}

// testVarPrefix is the prefix of the variables leaderrun's own test suite
// sets (scripts/*.sh write the test servers' URLs there): never leaderrun's
// configuration, so never refused or warned about.
const testVarPrefix = "LEADERRUN_TEST_"

// knownVars are the LEADERRUN_* variables leaderrun reads or sets.
func knownVars() []string {
	known := slices.Concat(otherVars, run.SecretVars)
	for _, v := range flagVars() {
		known = append(known, v)
	}
	return known
}

// nearestVar returns the known variable nearest to the unknown LEADERRUN_*
// variable k, or "" when none is a likely misspelling of it (within a third
// of the name's length).
func nearestVar(k string, known []string) string {
	var names []string
	for _, kn := range known {
		names = append(names, strings.TrimPrefix(kn, "LEADERRUN_"))
	}
	name := strings.TrimPrefix(k, "LEADERRUN_")
	if best := nearest(name, names, max(1, len(name)/3)); best != "" {
		return "LEADERRUN_" + best
	}
	return ""
}

// nearest returns the candidate nearest to word by editDistance (the first
// in sort order among equals), or "" when none is within most.
func nearest(word string, candidates []string, most int) string {
	best, bestD := "", most+1
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}

// unknownVars returns the LEADERRUN_* variables of environ that leaderrun
// neither reads nor sets, in order, without duplicates.
func unknownVars(environ []string) []string {
	known := knownVars()
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "LEADERRUN_") || strings.HasPrefix(k, testVarPrefix) || slices.Contains(known, k) || slices.Contains(out, k) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// misspeltVars returns one warning for each LEADERRUN_* variable in environ
// that leaderrun does not read but that is a likely misspelling of one it
// does (LEADERRUN_TLL for LEADERRUN_TTL): systemd units and CI set
// variables, not flags, and a typo there would otherwise be silently
// ignored. A LEADERRUN_* name far from every known one (a script's own
// LEADERRUN_JOB_DIR) is left alone: leaderrun does not own the prefix.
func misspeltVars(environ []string) []string {
	known := knownVars()
	var out []string
	for _, k := range unknownVars(environ) {
		if best := nearestVar(k, known); best != "" {
			out = append(out, fmt.Sprintf("%s is not a leaderrun variable and is ignored; did you mean %s?", printable(k), best))
		}
	}
	return out
}

// strayStoreVar refuses a run whose store was not given (neither --store nor
// LEADERRUN_STORE) while an unknown LEADERRUN_* variable of environ was
// evidently meant to give it: a near miss of LEADERRUN_STORE
// (LEADERRUN_STOR, LEADERRUN_STORE_URL), or any unknown variable whose value
// is a store URL (LEADERRUN_REDIS=redis://…). Ignoring it would take the
// lease in this host's file store, which excludes no other host: on a fleet
// every host would run the job. The value is never shown (it may hold a
// password).
func strayStoreVar(environ []string, getenv func(string) string) error {
	known := knownVars()
	for _, k := range unknownVars(environ) {
		name := strings.TrimPrefix(k, "LEADERRUN_")
		switch {
		case nearestVar(k, known) == storeVar || strings.HasPrefix(name, "STOR"):
			return lease.NewError(fmt.Sprintf("%s is not a leaderrun variable; did you mean %s? Without %s or --store the lease would be taken in this host's file store, which excludes no other host: nothing was run", printable(k), storeVar, storeVar), lease.ErrConfig)
		case looksLikeStoreURL(getenv(k)):
			return lease.NewError(fmt.Sprintf("%s holds a URL, but leaderrun reads the store only from %s or --store; without them the lease would be taken in this host's file store, which excludes no other host: nothing was run (rename the variable to %s, or give --store)", printable(k), storeVar, storeVar), lease.ErrConfig)
		}
	}
	return nil
}

// looksLikeStoreURL reports whether v is written as a URL: scheme:// with
// any scheme, or a scheme leaderrun knows followed by ':' (redis:host).
func looksLikeStoreURL(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	scheme, rest, ok := strings.Cut(v, ":")
	if !ok || scheme == "" || !isSchemeWord(scheme) {
		return false
	}
	_, known := storetab.ByScheme(scheme)
	return known || strings.HasPrefix(rest, "//")
}

// isSchemeWord reports whether s can be a URL scheme (RFC 3986: a letter,
// then letters, digits, + - .).
func isSchemeWord(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// nearCommand refuses the first word of a command written without "--"
// when it looks like a mistyped or shortened leaderrun command: the user
// most likely meant the command, and running a program of that name under a
// lease instead (or failing with "command not found") is not what they
// asked for. A word that is no program on PATH is refused when it is within
// a third of its length of a command (stauts, Status, chek) or a prefix of
// one of three letters or more (stat, hist); a program on PATH only in the
// second case (stat: `svn stat`, `git stat…`), with how to run it: after
// "--", which always runs COMMAND as written. A program merely one letter
// from a command (patch, batch) runs as before.
func nearCommand(word string) error {
	if strings.Contains(word, "/") {
		return nil // a path names a program
	}
	low := strings.ToLower(word)
	_, notProgram := exec.LookPath(word)
	for _, c := range append(subcommandNames(), "help") {
		prefix := len(low) >= 3 && strings.HasPrefix(c, low)
		near := editDistance(low, c) <= max(1, len(low)/3)
		switch {
		case notProgram != nil && (prefix || near):
			return usagef("unknown command %s; did you mean %s? (a program to run under the lease goes after --: leaderrun [flags] -- COMMAND)", shellQuote(printable(word)), c)
		case prefix:
			return usagef("%s is short for the command %s and is also a program: write leaderrun %s … for the command, or leaderrun [flags] -- %s … to run the program under a lease", shellQuote(printable(word)), c, c, shellQuote(printable(word)))
		}
	}
	return nil
}
