package bloblease

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/leaderrun/leaderrun/lease"
)

// TestListSlots: the listing names the slots that have a blob, held or
// released, and nothing of the slot counter, of slot 0 or of another lease
// whose name starts alike; SlotStatus then reads those slots only and finds
// their holders and number.
func TestListSlots(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{CallTimeout: 5 * time.Second})
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if ks, err := s.ListSlots(ctx, "job"); err != nil || len(ks) != 0 {
		t.Fatalf("ListSlots in an empty container: %v, %v; want none", ks, err)
	}
	take := func(name string) lease.Lease {
		t.Helper()
		_, k, _ := lease.ParseSlotName(name)
		r := req15(name, lease.SlotLabel("h", k, 6)) // as a --slots 6 run labels it
		r.Slots = 6
		l, err := s.TryAcquire(ctx, r)
		if err != nil {
			t.Fatalf("TryAcquire %s: %v", name, err)
		}
		return l
	}
	take("job")
	take(lease.SlotName("job", 2))
	five := take(lease.SlotName("job", 5))
	take(lease.SlotName("jobs", 3))
	if err := five.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ks, err := s.ListSlots(ctx, "job")
	if err != nil || !slices.Equal(ks, []int{2, 5}) {
		t.Fatalf("ListSlots: %v, %v; want [2 5]", ks, err)
	}
	hs, n, err := lease.SlotStatus(ctx, s, "job", 0)
	if err != nil || n != 6 || len(hs) != 2 || hs[0].Slot != 0 || hs[1].Slot != 2 {
		t.Fatalf("SlotStatus: %+v, %d, %v; want slots 0 and 2 held of 6", hs, n, err)
	}
}

// A SAS without list permission (leases work without it) still reads a
// lease's slots: ListSlots names every slot that may exist.
func TestListSlotsWithoutListPermission(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	cont := freshContainer()
	owner := openAzurite(t, ep, cont, Options{CallTimeout: 5 * time.Second})
	t.Cleanup(func() { owner.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := req15(lease.SlotName("job", 2), lease.SlotLabel("h", 2, 3))
	r.Slots = 3
	if _, err := owner.TryAcquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	qp := accountSAS(t, sas.AccountPermissions{Read: true, Write: true, Create: true, Add: true})
	s, err := Open(ctx, "azblob+"+ep+"/"+cont+"?"+qp.Encode(), Options{CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if ks, err := s.ListSlots(ctx, "job"); err != nil || len(ks) != lease.MaxSlots-1 {
		t.Fatalf("ListSlots without list permission: %d slots, %v; want all %d", len(ks), err, lease.MaxSlots-1)
	}
	hs, n, err := lease.SlotStatus(ctx, s, "job", 0)
	if err != nil || n != 3 || len(hs) != 1 || hs[0].Slot != 2 {
		t.Fatalf("SlotStatus: %+v, %d, %v; want slot 2 of 3 held", hs, n, err)
	}
}
