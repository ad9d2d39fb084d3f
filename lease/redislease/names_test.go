package redislease

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestDerivedNames: every key and channel of a lease is leaderrun:{NAME}
// followed by nothing, "~k" (a slot) or ":KIND"; NAME cannot hold '{', '}'
// or ':', so no lease name reaches another's keys, however it is chosen
// (x:token, x}:runs and the like are not lease names; x.token is a key of
// its own).
func TestDerivedNames(t *testing.T) {
	leasetest.DerivedNames(t, []string{"x", "x.token", "x-runs", "a/b", "x~1"}, func(n string) leasetest.Derived {
		return leasetest.Derived{Objects: map[string]string{
			"record":          recordKey(n),
			"slot 1":          recordKey(lease.SlotName(n, 1)),
			"slot 12":         recordKey(lease.SlotName(n, 12)),
			"counter":         counterKey(n),
			"runs":            runsKey(n),
			"candidates":      candidatesKey(n),
			"candidate recs":  candRecordsKey(n),
			"changed channel": changedChan(n),
			"released":        releaseChan(n),
			"slot 1 released": releaseChan(lease.SlotName(n, 1)),
		}}
	})
	if counterKey(lease.SlotName("x", 3)) != counterKey("x") {
		t.Errorf("slot 3 of x mints from %s; want x's counter %s", counterKey(lease.SlotName("x", 3)), counterKey("x"))
	}
}
