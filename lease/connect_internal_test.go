package lease

import (
	"context"
	"testing"
)

// connectorLease is a Lease that sets its connection up on Connect.
type connectorLease struct {
	Lease
	connects int
}

func (c *connectorLease) Connect(context.Context) error { c.connects++; return nil }

// A slot's lease is a wrapper: the keeper still finds the store's
// Connector through it, so a --slots holder reconnects within the time
// left to the stop point, not within one call's timeout.
func TestKeeperConnectsThroughASlotLease(t *testing.T) {
	inner := &connectorLease{}
	k := &Keeper{l: &slotLease{Lease: inner, name: "n", slot: 1, slots: 2}}
	if err := k.connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if inner.connects != 1 {
		t.Fatalf("Connect called %d times through the slot's lease; want 1", inner.connects)
	}
}
