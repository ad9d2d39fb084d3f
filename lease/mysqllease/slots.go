package mysqllease

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.SlotLister = (*Store)(nil)

// ListSlots returns the slots k ≥ 1 of lease name that have a row, held or
// not, in one statement on the table's primary key: the exact names of
// every slot that may exist (no pattern: '_' in a lease name is a LIKE
// wildcard), so that status and watch of a lease whose slot count is not
// known (slot 0 free) read those slots only, not all of them.
func (s *Store) ListSlots(ctx context.Context, name string) ([]int, error) {
	args := make([]any, 0, lease.MaxSlots-1)
	for k := 1; k < lease.MaxSlots; k++ {
		args = append(args, lease.SlotName(name, k))
	}
	query := "SELECT name FROM " + quote(s.q.table) + " WHERE name IN (?" + strings.Repeat(", ?", len(args)-1) + ")"
	var ks []int
	err := s.do(ctx, "slots of "+name, nil, func(ctx context.Context, c *sql.Conn) error {
		ks = ks[:0]
		rows, err := c.QueryContext(ctx, query, args...)
		if isNum(err, erNoSuchTable) {
			return nil // no table yet: no slot
		}
		if err != nil {
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
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ks)
	return ks, nil
}
