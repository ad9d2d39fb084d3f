package gcslease

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease/objlease"
	"github.com/leaderrun/leaderrun/lease/storetab/rowtest"
)

// TestRow holds the store table's GCS row to this package, without a
// server: the URL parser reaches nothing, and the store's limits and
// capabilities are objlease's with the default poll. The store reads no
// secret from the environment (credentials are files Google's client
// finds).
func TestRow(t *testing.T) {
	rowtest.Check(t, "GCS", rowtest.Facts{
		Schemes: Schemes,
		Accepts: func(scheme string) error {
			_, err := parseURL(scheme + "://bucket/prefix")
			return err
		},
		Store: &Store{Store: objlease.New(objlease.Config{})},
		Poll:  DefaultPoll,
	})
}
