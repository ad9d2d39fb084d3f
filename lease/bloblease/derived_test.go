package bloblease

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestDerivedNames: a lease's blobs are NAME.lease, NAME~k.lease (slots),
// NAME.runs, NAME~token and its standbys NAME.lease~standby~ID, listed as
// a range. No lease name reaches another's: what ends in .lease or .runs
// without a '~' is that lease's own, and the rest are decoded at the first
// '~', which no name holds (before, lease x.standby.ID's blob fell in the
// range of x's standbys, and only the ID's length kept it out).
func TestDerivedNames(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	leasetest.DerivedNames(t, []string{"x", "x.lease", "x.runs", "x.standby." + id, "x.lease.standby", "a/b"}, func(n string) leasetest.Derived {
		return leasetest.Derived{
			Objects: map[string]string{
				"lease":   blobName(n),
				"slot 1":  blobName(lease.SlotName(n, 1)),
				"slot 12": blobName(lease.SlotName(n, 12)),
				"runs":    runsBlobName(n),
				"token":   tokenBlobName(n),
				"standby": standbyPrefix(n) + id,
			},
			Ranges: []string{standbyPrefix(n)},
		}
	})
}
