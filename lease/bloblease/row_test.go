package bloblease

import (
	"context"
	"testing"

	"github.com/leaderrun/leaderrun/lease/storetab/rowtest"
)

// TestRow holds the store table's Azure row to this package. Open does no
// I/O, so the store is a real one, with its default poll.
func TestRow(t *testing.T) {
	s, err := Open(context.Background(), "azblob+http://127.0.0.1:10000/devstoreaccount1/leaderrun", Options{Getenv: func(k string) string {
		if k == envKey {
			return testKey
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rowtest.Check(t, "Azure", rowtest.Facts{
		Schemes: Schemes(),
		Accepts: func(scheme string) error {
			raw := scheme + "://127.0.0.1:10000/devstoreaccount1/leaderrun"
			if scheme == "azblob" {
				raw = scheme + "://devstoreaccount1/leaderrun"
			}
			_, err := parseURL(raw)
			return err
		},
		Store:      s,
		Poll:       DefaultPollInterval,
		SecretVars: []string{envKey, envConnString, envSAS},
	})
}
