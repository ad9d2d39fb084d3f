package kubelease

import (
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestDerivedNames: no lease name maps to another lease's history,
// standby or token counter object (before, lease x.history was lease x's
// history object, refused as "another lease's"), nor to another's slot.
// Nor does a name of the shape of a hashed object name (job-ad617a0fdd,
// "Job"'s) map to another's object: it is hashed itself.
func TestDerivedNames(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	leasetest.DerivedNames(t, []string{"x", "x.history", "x.standby-0123456789abcdef", "x-token", "Job", "a/b", "lr--x", "x.lr--history", strings.Repeat("y", 200)},
		func(n string) leasetest.Derived {
			return leasetest.Derived{Objects: map[string]string{
				"lease":   objName(n),
				"slot 1":  objName(lease.SlotName(n, 1)),
				"slot 12": objName(lease.SlotName(n, 12)),
				"history": historyName(n),
				"standby": standbyName(n, id),
				"token":   auxName(n, "token"),
			}}
		})
	for _, n := range []string{"x", strings.Repeat("y", 200), "Y/z"} {
		for _, o := range []string{historyName(n), standbyName(n, id), auxName(n, "token")} {
			if !dnsSubdomain(o) || len(o) > 253 {
				t.Errorf("%q: not a valid object name", o)
			}
		}
	}
}
