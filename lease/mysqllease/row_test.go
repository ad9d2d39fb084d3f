package mysqllease

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease/storetab/rowtest"
)

// TestRow holds the store table's MySQL row to this package. The store
// reaches no server: its Limits and CandidateTiming read only its
// configuration, here the default poll's.
func TestRow(t *testing.T) {
	rowtest.Check(t, "MySQL", rowtest.Facts{
		Schemes: Schemes,
		Accepts: func(scheme string) error {
			_, _, err := parseScheme(scheme + "://u@127.0.0.1:3306/db")
			return err
		},
		Store:      &Store{cfg: &config{poll: DefaultPoll}},
		Poll:       DefaultPoll,
		SecretVars: []string{EnvPassword},
	})
}
