package cmd

import (
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

func TestMisspeltVars(t *testing.T) {
	got := misspeltVars([]string{
		"LEADERRUN_TLL=5s",           // typo of LEADERRUN_TTL
		"LEADERRUN_STROE=redis://x",  // transposition
		"LEADERRUN_TTL=5s",           // known
		"LEADERRUN_LEASE_TOKEN=3",    // given to children
		"LEADERRUN_TOKEN=3",          // given to children (old name)
		"LEADERRUN_JOB_DIRECTORY=/x", // a script's own: far from every name
		"LEADERRUN_TEST_REDIS_URL=x", // the test harness's own
		"PATH=/bin",
	})
	want := []string{
		"LEADERRUN_TLL is not a leaderrun variable and is ignored; did you mean LEADERRUN_TTL?",
		"LEADERRUN_STROE is not a leaderrun variable and is ignored; did you mean LEADERRUN_STORE?",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("misspeltVars = %q; want %q", got, want)
	}
}

// --pass-env NOTIFY_SOCKET is accepted (leaderrun removes it from the child
// under systemd) and keeps it for the child.
func TestPassEnvNotifySocket(t *testing.T) {
	if _, err := parsePassEnv([]string{"NOTIFY_SOCKET"}, lease.DashFlag); err != nil {
		t.Fatalf("--pass-env NOTIFY_SOCKET: %v", err)
	}
}
