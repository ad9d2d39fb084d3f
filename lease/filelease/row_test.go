package filelease

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease/storetab/rowtest"
)

// TestRow holds the store table's file row to this package. The file
// store's URL (file:///dir) is read by cmd, whose TestDrivers holds the
// row's scheme to it; Open takes the directory.
func TestRow(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rowtest.Check(t, "file", rowtest.Facts{
		Store: s,
	})
}
