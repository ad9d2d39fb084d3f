package etcdlease

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestDerivedNames: a lease's keys are PREFIX+NAME, PREFIX+NAME~k (a slot),
// and PREFIX+NAME:runs/… and PREFIX+NAME:candidates/…, which are listed and
// deleted as ranges; ':' is in no lease name, so no key of another lease
// (x.runs, x:runs is no lease name, a/b:runs) falls in them.
func TestDerivedNames(t *testing.T) {
	s := &Store{cfg: &config{prefix: DefaultPrefix}}
	leasetest.DerivedNames(t, []string{"x", "x.runs", "x/runs", "x/candidates/a", "a/b"}, func(n string) leasetest.Derived {
		return leasetest.Derived{
			Objects: map[string]string{
				"lease":     s.key(n),
				"slot 1":    s.key(lease.SlotName(n, 1)),
				"slot 12":   s.key(lease.SlotName(n, 12)),
				"run":       runKey(s.runKeys(n), 1234567890123456),
				"candidate": s.candidateKeys(n) + "0123456789abcdef0123456789abcdef",
			},
			Ranges: []string{s.runKeys(n), s.candidateKeys(n)},
		}
	})
}
