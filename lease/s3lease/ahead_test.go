package s3lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// A token counter object written more than lease.MaxClockSkew ahead of
// the store's clock (30 days, by hand or by a clock that stepped back)
// refuses the acquisition with ErrTokenAhead (and ErrConfig: exit 125), in
// one line naming the object, and frees the lease object again; a minute
// within the bound it is followed, and the grant is the store's clock (its
// Date), not the token's (--once-per decides on it). (The counter was
// followed whatever its lead: the runs were then left out of the history
// as from the future.)
func TestCounterAheadOfClock(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	s := openStore(t, f.url("ahead"), env(t))
	ctx := context.Background()
	set := func(name string, ahead time.Duration) {
		t.Helper()
		f.put(t, "ahead/token/"+name, fmt.Appendf(nil, `{"name":%q,"token":%d}`, name, time.Now().Add(ahead).UnixMicro()))
	}
	set("far", 30*24*time.Hour)
	_, err := s.TryAcquire(ctx, lease.Request{Name: "far", Label: "a", ID: lease.NewID(), TTL: ttl})
	if !errors.Is(err, lease.ErrTokenAhead) || !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "token/far") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("acquire with the counter 30 days ahead: %v; want one line, ErrTokenAhead, naming the counter object", err)
	}
	if h, err := s.Status(ctx, "far"); err != nil || h != nil {
		t.Fatalf("status after the refused acquisition: %+v, %v; want free", h, err)
	}
	set("near", lease.MaxClockSkew-time.Minute)
	l, err := s.TryAcquire(ctx, lease.Request{Name: "near", Label: "a", ID: lease.NewID(), TTL: ttl})
	if err != nil {
		t.Fatalf("acquire with the counter a minute within the bound: %v", err)
	}
	defer l.Release(ctx)
	leasetest.CheckGranted(t, l.Info(), 30*time.Second)
}

// A counter object deleted within the second of the last token (the
// store's Date counts whole seconds) mints no token at or below it: the
// next counts from the end of that second. (It minted the same token
// again.) Tried until both acquisitions fall in one second of the store's
// clock, where the repeat could happen.
func TestCounterDeletedWithinItsSecond(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	s := openStore(t, f.url("lost"), env(t))
	ctx := context.Background()
	for try := 0; ; try++ {
		name := fmt.Sprint("n", try)
		l1, err := s.TryAcquire(ctx, lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		_ = l1.Release(ctx)
		if _, err := f.backend.DeleteObject(testBucket, "lost/token/"+name); err != nil {
			t.Fatal(err)
		}
		l2, err := s.TryAcquire(ctx, lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		_ = l2.Release(ctx)
		a, b := l1.Info(), l2.Info()
		if b.Token <= a.Token {
			t.Fatalf("token %d after the counter was deleted, not above the last one, %d", b.Token, a.Token)
		}
		if a.Granted.Truncate(time.Second).Equal(b.Granted.Truncate(time.Second)) {
			return
		}
		if try == 20 {
			t.Fatal("no two acquisitions within one second of the store's clock in 20 tries")
		}
	}
}
