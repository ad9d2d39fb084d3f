package run

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/leaderrun/leaderrun/lease/storetab"
)

// Variables leaderrun gives its child. They are deliberately not the names
// of leaderrun's own configuration variables: a leaderrun started by the
// child must not read the outer lease's name or holder back as its own
// --name and --holder: a nested run would wait forever for the outer
// lease, which its own parent holds.
const (
	EnvLease       = "LEADERRUN_LEASE"
	EnvLeaseHolder = "LEADERRUN_LEASE_HOLDER"
	EnvLeaseToken  = "LEADERRUN_LEASE_TOKEN"
	// EnvTokenDeprecated is the old name of EnvLeaseToken, kept with the same
	// value because scripts read it; it is not a configuration variable, so a
	// nested leaderrun ignores it.
	EnvTokenDeprecated = "LEADERRUN_TOKEN"
)

// outerLeaseVars identify the lease of this run when they configured it; the
// child does not get them.
var outerLeaseVars = []string{"LEADERRUN_NAME", "LEADERRUN_HOLDER"}

// SecretVars are the environment variables a store reads a credential from
// (storetab). Those a store read for this run are removed from the child's
// environment unless --pass-env names them.
var SecretVars = storeSecretVars()

// storeSecretVars collects the stores' SecretVars, in table order.
func storeSecretVars() []string {
	var out []string
	for _, r := range storetab.All() {
		out = append(out, r.SecretVars...)
	}
	return out
}

// StoreVar is --store's variable; it is removed from the child's
// environment when its URL carries a credential.
const StoreVar = "LEADERRUN_STORE"

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

// RemovableVars lists what leaderrun may remove from the child's
// environment, i.e. the names --pass-env accepts.
func RemovableVars() []string {
	return slices.Concat(outerLeaseVars, SecretVars, []string{StoreVar, notifyVar}, monitorVars)
}

// childEnviron builds the child's environment from leaderrun's own (base, in
// os.Environ form): the variables that identify the outer lease and the
// credentials the store consumed are removed (unless keep names them), and
// the lease's name, holder and fencing token are added.
func childEnviron(base []string, reads *envReads, keep map[string]bool, name, holder string, token uint64) []string {
	drop := map[string]bool{EnvLease: true, EnvLeaseHolder: true, EnvLeaseToken: true, EnvTokenDeprecated: true}
	for _, k := range slices.Concat(outerLeaseVars, monitorVars) {
		drop[k] = !keep[k]
	}
	for _, k := range SecretVars {
		if reads.consumed(k) && !keep[k] {
			drop[k] = true
		}
	}
	out := make([]string, 0, len(base)+4)
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if drop[k] || (k == StoreVar && !keep[k] && urlCarriesCredential(v)) {
			continue
		}
		out = append(out, kv)
	}
	tok := strconv.FormatUint(token, 10)
	return append(out,
		EnvLease+"="+name,
		EnvLeaseHolder+"="+holder,
		EnvLeaseToken+"="+tok,
		EnvTokenDeprecated+"="+tok,
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
