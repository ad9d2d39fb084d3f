package pglease

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease/storetab/rowtest"
)

// TestRow holds the store table's PostgreSQL row to this package.
func TestRow(t *testing.T) {
	rowtest.Check(t, "PostgreSQL", rowtest.Facts{
		Schemes: Schemes,
		Accepts: func(scheme string) error {
			_, _, err := parseScheme(scheme + "://127.0.0.1:5432/db")
			return err
		},
		Store:      &Store{},
		SecretVars: []string{EnvPassword},
	})
}
