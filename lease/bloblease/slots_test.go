package bloblease

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/leaderrun/leaderrun/lease"
)

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
