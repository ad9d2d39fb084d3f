package e2e

import (
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// status of a lease the store knows nothing of (a name never used with it,
// a mistyped one, a PostgreSQL database without the lease table, an Azure
// container not yet made) says so and exits 4, on every store; once it has
// run, it is free (exit 3) with its last run. Both read "free" (exit 3).
func TestStatusNothingKnownEveryStore(t *testing.T) {
	stores := []struct {
		name  string
		setup func(t *testing.T) []string
	}{
		{"file", func(t *testing.T) []string { return []string{"LEADERRUN_STORE=" + fileStore(t)} }},
		{"redis", func(t *testing.T) []string { _, env := redisE2EShared(t); return env }},
		{"etcd", func(t *testing.T) []string { _, env := etcdE2EShared(t); return env }},
		{"postgres", func(t *testing.T) []string { _, env := pgE2EShared(t); return env }},
		{"postgres-no-table", func(t *testing.T) []string {
			raw, env := pgE2EShared(t)
			sep := "?"
			if strings.Contains(raw, "?") {
				sep = "&"
			}
			return append(env, "LEADERRUN_STORE="+raw+sep+"table=unknown_"+lease.NewID()[:10])
		}},
		{"azure", func(t *testing.T) []string {
			_, store := azShared(t, "")
			return append(azEnv(azDevKey), "LEADERRUN_STORE="+store)
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { statusNothingKnown(t, st.setup(t)) })
	}
}

// statusNothingKnown: status of a name never used with the store is exit
// 4, "nothing known"; after one run it is 3, free, with the last run.
func statusNothingKnown(t *testing.T, env []string) {
	name := "unknown-" + lease.NewID()[:8]
	code, out, stderr := leaderOut(t, env, "status", name)
	if code != 4 || out != name+": nothing known (no holder, standby or recorded run in this store: a name never used with it, or mistyped)\n" {
		t.Fatalf("status of a name never used: exit %d, %q (%s); want 4, nothing known", code, out, stderr)
	}
	code, out, _ = leaderOut(t, env, "status", "--json", name)
	if code != 4 || !strings.Contains(out, `"unknown":true`) {
		t.Fatalf("status --json of a name never used: exit %d, %q", code, out)
	}
	if code, stderr := runLR(t, env, "--name", name, "--", "true"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	code, out, _ = leaderOut(t, env, "status", name)
	if code != 3 || !strings.HasPrefix(out, name+": free\n  last run: ") {
		t.Fatalf("status after a run: exit %d, %q; want 3, free and the last run", code, out)
	}
}

// A refusing etcd is "connection refused" at once, as Redis and PostgreSQL
// say it, not "no answer in time" after the call timeout; an unknown store
// directory is an error naming it.
func TestStatusRefusedStores(t *testing.T) {
	for _, tc := range []struct{ store, want string }{
		{"etcd://127.0.0.1:1", "cannot reach etcd at 127.0.0.1:1: connection refused"},
		{"redis://127.0.0.1:1", "cannot reach Redis at 127.0.0.1:1: connection refused"},
		{"postgres://u@127.0.0.1:1/db?sslmode=disable", "cannot reach PostgreSQL at 127.0.0.1:1: connection refused"},
	} {
		code, _, stderr := leaderOut(t, nil, "status", "--store", tc.store, "x")
		if code != 125 || !strings.Contains(stderr, tc.want) {
			t.Errorf("status --store %s: exit %d, %q; want 125 and %q", tc.store, code, stderr, tc.want)
		}
	}
}
