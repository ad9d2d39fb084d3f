package pglease

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// Slots (lease.Request.Slots above 1). Each slot of lease NAME is a lease of
// its own, a row of the leases table: slot 0 is NAME's row itself, slot k
// the row NAME~k ('~' is in no lease name). Tokens come from the one
// sequence every lease draws from, and an acquisition of any slot of NAME
// takes NAME's advisory lock, so it mints only after every earlier
// acquisition of a slot of NAME has committed: greatest(nextval, server
// clock) then strictly increases across the slots, as it does across the
// acquisitions of one lease. A lease taken without slots takes the lock it
// always did.

// tokenDomain is the lease whose advisory lock an acquisition of name
// takes: the lease itself, for a slot the lease it is a slot of.
func tokenDomain(name string) string {
	base, _, _ := lease.ParseSlotName(name)
	return base
}

var _ lease.SlotLister = (*Store)(nil)

// ListSlots returns the slots k ≥ 1 of lease name that have a row, held or
// not, in one statement on the table's primary key (exact names: no
// pattern, which the database's collation would order its own way).
func (s *Store) ListSlots(ctx context.Context, name string) ([]int, error) {
	names := make([]string, 0, lease.MaxSlots-1)
	for k := 1; k < lease.MaxSlots; k++ {
		names = append(names, lease.SlotName(name, k))
	}
	var ks []int
	err := s.do(ctx, "status "+name, false, func(ctx context.Context, c *pgx.Conn) error {
		ks = ks[:0]
		rows, err := c.Query(ctx, "SELECT name FROM "+s.q.table+" WHERE name = ANY($1::text[])", names)
		if err != nil {
			if isCode(err, "42P01") {
				return nil // no table yet: no slot
			}
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			if _, k, ok := lease.ParseSlotName(n); ok {
				ks = append(ks, k)
			}
		}
		if err := rows.Err(); err != nil && !isCode(err, "42P01") {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ks)
	return ks, nil
}
