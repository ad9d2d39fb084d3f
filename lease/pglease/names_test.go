package pglease

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestDerivedNames: a lease is a row keyed by its name in the lease table
// (a slot the row NAME~k, '~' being in no lease name), its runs and
// standbys rows keyed by the name in tables of their own, and its advisory
// lock the hash of TABLE/NAME (a slot's, its lease's); no statement
// matches names by pattern. So no lease name reaches another's rows.
func TestDerivedNames(t *testing.T) {
	q := newQueries(pgx.Identifier{"leaderrun"}, "leaderrun")
	leasetest.DerivedNames(t, []string{"x", "x_runs", "x~1", "leaderrun/x", "a/b"}, func(n string) leasetest.Derived {
		return leasetest.Derived{Objects: map[string]string{
			"row":      q.table + ":" + n,
			"slot 1":   q.table + ":" + lease.SlotName(n, 1),
			"slot 12":  q.table + ":" + lease.SlotName(n, 12),
			"runs":     q.table + "_runs:" + n,
			"standbys": q.cands + ":" + n,
			"lock":     "lock:" + q.lockKey(n),
		}}
	})
	if q.lockKey(lease.SlotName("x", 2)) != q.lockKey("x") {
		t.Errorf("slot 2 of x takes lock %q; want x's %q", q.lockKey(lease.SlotName("x", 2)), q.lockKey("x"))
	}
}
