package run

import (
	"slices"
	"strings"
	"testing"
)

// TestChildEnvironMonitorVars: the child gets none of the monitoring
// variables, --ping's companions included: a leaderrun it starts without
// --ping would refuse LEADERRUN_PING_FORMAT or LEADERRUN_PING_SKIPPED
// alone. --pass-env keeps one.
func TestChildEnvironMonitorVars(t *testing.T) {
	base := []string{"PATH=/bin", "LEADERRUN_PING=https://hc-ping.com/k", "LEADERRUN_PING_FORMAT=kuma", "LEADERRUN_PING_SKIPPED=true", "LEADERRUN_METRICS_FILE=/m.prom"}
	env := childEnviron(base, newEnvReads(func(string) string { return "" }), map[string]bool{"LEADERRUN_METRICS_FILE": true}, "n", "h", 1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != "LEADERRUN_METRICS_FILE" && slices.Contains(monitorVars, k) {
			t.Errorf("the child got %s", kv)
		}
	}
	if !slices.Contains(env, "LEADERRUN_METRICS_FILE=/m.prom") || !slices.Contains(env, "PATH=/bin") {
		t.Errorf("the child's environment %q lost what it keeps", env)
	}
}
