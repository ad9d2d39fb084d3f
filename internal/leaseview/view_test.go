package leaseview

import (
	"context"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestHolderNotItsOwnStandby: a standby whose registration outlives its
// acquisition (of the lease, or of one of its slots) is shown as the
// holder only, not also as a standby; other standbys stay listed.
func TestHolderNotItsOwnStandby(t *testing.T) {
	ctx := context.Background()
	for _, slots := range []int{1, 3} {
		s := &leasetest.MemStore{}
		name := "job"
		taken := name
		if slots > 1 {
			taken = lease.SlotName(name, 1)
		}
		for _, id := range []string{"took-it", "waits"} {
			if _, err := s.Join(ctx, name, lease.Candidate{ID: id, Label: id, Since: time.Now()}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		req := lease.Request{Name: taken, Label: "took-it", ID: "took-it", TTL: time.Minute}
		if slots > 1 {
			req.Label = lease.SlotLabel("took-it", 1, slots)
		}
		if _, err := s.TryAcquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		v, err := Read(ctx, s, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range v.Standbys {
			ids = append(ids, c.ID)
		}
		if len(ids) != 1 || ids[0] != "waits" {
			t.Errorf("%d slots: standbys %q; want only the one that waits", slots, ids)
		}
	}
}
