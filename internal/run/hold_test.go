package run

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// slowHold is a lease whose ReleaseHeld, as a store's, counts the hold from
// when the call reaches it (kept), and answers a while later.
type slowHold struct {
	kept time.Time
}

func (l *slowHold) Info() lease.Holder                { return lease.Holder{Name: "job", Label: "h", Token: 1} }
func (l *slowHold) Renew(ctx context.Context) error   { return nil }
func (l *slowHold) Release(ctx context.Context) error { return nil }
func (l *slowHold) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	l.kept = time.Now().Add(hold)
	time.Sleep(20 * time.Millisecond) // the call's way back: what the event must not add
	return nil
}

// The "held" event names an end the store keeps the lease taken to, or
// later: never one after the store's. It was read after the call, and so
// named an end up to the call's length later (beside stress-ng on
// Kubernetes a waiter, rightly started at the stored end, started 32 ms
// before the end the event named).
func TestHeldUntilIsTheStoresOrEarlier(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	l := &slowHold{}
	const hold = 5 * time.Second
	if err := releaseHeld(&leadership{l: l, info: l.Info()}, hold, lease.Timing{TTL: time.Minute, CallTimeout: time.Second}, log); err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Event     string    `json:"event"`
		HeldUntil time.Time `json:"held_until"`
	}
	if err := json.Unmarshal(buf.Bytes(), &ev); err != nil || ev.Event != "held" {
		t.Fatalf("log %q: %v; want the held event", buf.String(), err)
	}
	if ev.HeldUntil.After(l.kept) {
		t.Fatalf("held_until %v is %v after the end the store kept (%v)", ev.HeldUntil, ev.HeldUntil.Sub(l.kept), l.kept)
	}
	if l.kept.Sub(ev.HeldUntil) > time.Second {
		t.Fatalf("held_until %v is %v before the end the store kept; want the moment the call was made", ev.HeldUntil, l.kept.Sub(ev.HeldUntil))
	}
}
