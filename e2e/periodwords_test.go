package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// TestPeriodWordsDocumented: every word --once-per takes for a calendar
// period (day, and daily as a crontab's reader writes it) is named in
// docs/usage.md, so that no accepted spelling is a secret.
func TestPeriodWordsDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("docs/usage.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"hour", "hourly", "day", "daily", "week", "weekly", "month", "monthly"} {
		if _, err := lease.ParsePeriod(w, nil); err != nil {
			t.Errorf("--once-per %s: %v", w, err)
		}
		if !strings.Contains(string(b), "`"+w+"`") {
			t.Errorf("docs/usage.md does not name --once-per %s", w)
		}
	}
}
