package cmd

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Variables leaderrun gives its child. They are deliberately not the names
// of leaderrun's own configuration variables: a leaderrun started by the
// child must not read the outer lease's name or holder back as its own
// --name and --holder: a nested run would wait forever for the outer
// lease, which its own parent holds.
const (
	envLease       = "LEADERRUN_LEASE"
	envLeaseHolder = "LEADERRUN_LEASE_HOLDER"
	envLeaseToken  = "LEADERRUN_LEASE_TOKEN"
	// envTokenDeprecated is the old name of envLeaseToken, kept with the same
	// value because scripts read it; it is not a configuration variable, so a
	// nested leaderrun ignores it.
	envTokenDeprecated = "LEADERRUN_TOKEN"
)

// outerLeaseVars identify the lease of this run when they configured it; the
// child does not get them.
var outerLeaseVars = []string{"LEADERRUN_NAME", "LEADERRUN_HOLDER"}

// secretVars are the environment variables a store reads a credential from.
// Those a store read for this run are removed from the child's environment
// unless --pass-env names them.
var secretVars = []string{
	"REDISCLI_AUTH",                     // redislease.EnvPassword
	"LEADERRUN_REDIS_SENTINEL_PASSWORD", // redislease.EnvSentinelPassword
	"AZURE_STORAGE_KEY",
	"AZURE_STORAGE_CONNECTION_STRING",
	"AZURE_STORAGE_SAS_TOKEN",
	"ETCDCTL_USER",     // etcdlease.EnvUser
	"ETCDCTL_PASSWORD", // etcdlease.EnvPassword
	"PGPASSWORD",       // pglease.EnvPassword
}

// storeVar is --store's variable; it is removed from the child's
// environment when its URL carries a credential.
const storeVar = "LEADERRUN_STORE"

// envReads wraps getenv and remembers which variables were read with a
// non-empty value: what the store consumed.
type envReads struct {
	getenv func(string) string
	mu     sync.Mutex
	read   map[string]bool
}

func newEnvReads(getenv func(string) string) *envReads {
	return &envReads{getenv: getenv, read: map[string]bool{}}
}

// get is a getenv that records the read.
func (r *envReads) get(k string) string {
	v := r.getenv(k)
	if v != "" {
		r.mu.Lock()
		r.read[k] = true
		r.mu.Unlock()
	}
	return v
}

// consumed reports whether k was read with a value.
func (r *envReads) consumed(k string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read[k]
}

// removableVars lists what leaderrun may remove from the child's
// environment, i.e. the names --pass-env accepts.
func removableVars() []string {
	return slices.Concat(outerLeaseVars, secretVars, []string{storeVar, notifyVar}, monitorVars)
}

// parsePassEnv validates --pass-env: every name must be one leaderrun would
// otherwise remove, so a typo does not silently keep nothing.
func parsePassEnv(names []string) (map[string]bool, error) {
	keep := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(removableVars(), n) {
			return nil, usagef("--pass-env %s: leaderrun never removes %s from the child's environment; it removes only %s", n, n, strings.Join(removableVars(), ", "))
		}
		keep[n] = true
	}
	return keep, nil
}

// childEnviron builds the child's environment from leaderrun's own (base, in
// os.Environ form): the variables that identify the outer lease and the
// credentials the store consumed are removed (unless keep names them), and
// the lease's name, holder and fencing token are added.
func childEnviron(base []string, reads *envReads, keep map[string]bool, name, holder string, token uint64) []string {
	drop := map[string]bool{envLease: true, envLeaseHolder: true, envLeaseToken: true, envTokenDeprecated: true}
	for _, k := range slices.Concat(outerLeaseVars, monitorVars) {
		drop[k] = !keep[k]
	}
	for _, k := range secretVars {
		if reads.consumed(k) && !keep[k] {
			drop[k] = true
		}
	}
	out := make([]string, 0, len(base)+4)
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if drop[k] || (k == storeVar && !keep[k] && urlCarriesCredential(v)) {
			continue
		}
		out = append(out, kv)
	}
	tok := strconv.FormatUint(token, 10)
	return append(out,
		envLease+"="+name,
		envLeaseHolder+"="+holder,
		envLeaseToken+"="+tok,
		envTokenDeprecated+"="+tok,
	)
}

// credentialParams are the query parameters through which a store URL can
// carry a secret: Azure's SAS signature (sig), PostgreSQL's password and
// sslpassword (libpq's names, which pgx reads too). Compared without case.
var credentialParams = []string{"sig", "password", "sslpassword"}

// urlCarriesCredential reports whether a --store URL holds a secret: a
// password in its user info or a credential parameter (credentialParams) in
// its query. A URL that does not parse is assumed to hold one if it could.
func urlCarriesCredential(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		low := strings.ToLower(raw)
		if strings.Contains(raw, "@") {
			return true
		}
		for _, k := range credentialParams {
			if strings.Contains(low, k+"=") {
				return true
			}
		}
		return false
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			return true
		}
	} else if strings.Contains(raw, "@") {
		return true // a user info that did not parse as one: redis:/:pw@host
	}
	for k, vs := range u.Query() {
		for _, c := range credentialParams {
			if strings.EqualFold(k, c) && slices.ContainsFunc(vs, func(v string) bool { return v != "" }) {
				return true
			}
		}
	}
	return false
}
