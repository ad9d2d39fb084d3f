package cmd

import (
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// An outcome this version does not know (another version's, or forged in
// a shared history) is counted as unknown, so the counts add up to the runs
// (it was left out of every count).
func TestHistoryMetricsCountsUnknownOutcomes(t *testing.T) {
	now := time.Now()
	runs := []runJSON{
		{Run: lease.Run{Name: "j", Token: 3, Start: now, End: now.Add(time.Second), Outcome: "pwned"}},
		{Run: lease.Run{Name: "j", Token: 2, Start: now.Add(-time.Hour), End: now.Add(-time.Minute), Outcome: lease.OutcomeOK}},
		{Run: lease.Run{Name: "j", Token: 1, Start: now.Add(-2 * time.Hour)}},
	}
	text := string(historyMetrics("j", runs))
	for _, want := range []string{
		`leaderrun_history_runs{name="j",outcome="unknown"} 1`,
		`leaderrun_history_runs{name="j",outcome="ok"} 1`,
		`leaderrun_history_runs{name="j",outcome="no-end"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
}
