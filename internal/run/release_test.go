package run

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

// slowSetupLease is a lease whose calls need a connection set up first
// (a lease.Connector), and whose set-up takes longer than a call may: a
// connection dropped while the child ran, to a loaded server.
type slowSetupLease struct {
	lease.Lease
	setup     time.Duration
	connected bool
}

func (l *slowSetupLease) Connect(ctx context.Context) error {
	select {
	case <-time.After(l.setup):
		l.connected = true
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l *slowSetupLease) Release(ctx context.Context) error {
	if !l.connected {
		<-ctx.Done() // the call would have to set the connection up itself
		return lease.NewError("no answer in time", lease.ErrUnavailable)
	}
	return l.Lease.Release(ctx)
}

// A release sets the lease's connection up before its call, as the keeper
// does before a renewal: a set-up longer than the call timeout is a wait,
// and the lease is freed for the standbys, not left to expire.
func TestReleaseConnectsFirst(t *testing.T) {
	store, err := filelease.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	l, err := store.TryAcquire(ctx, lease.Request{Name: "job", Label: "me", ID: lease.NewID(), TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	timing := lease.Timing{TTL: 10 * time.Second, CallTimeout: 20 * time.Millisecond}
	slow := &slowSetupLease{Lease: l, setup: 5 * timing.CallTimeout}
	if err := releaseLease(&leadership{l: slow}, timing, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if !slow.connected {
		t.Fatal("the release did not set the connection up")
	}
	if h, err := store.Status(ctx, "job"); err != nil || h != nil {
		t.Fatalf("after the release: %+v, %v; want the lease free", h, err)
	}
}
