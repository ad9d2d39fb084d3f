package say

import (
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Minute: "10m", 133 * time.Second: "2m13s", time.Hour: "1h", 90 * time.Minute: "1h30m", 1234 * time.Millisecond: "1.2s", 665 * time.Millisecond: "665ms"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q; want %q", d, got, want)
		}
	}
}

// The holder's since carries the date when it is not today.
func TestHeldBySince(t *testing.T) {
	now := time.Date(2026, 11, 22, 23, 30, 0, 0, time.Local)
	h := lease.Holder{Label: "web-1:42", Since: now.Add(-25 * time.Hour), Token: 5}
	if got, want := HeldBy(h, now), "held by web-1:42 since 2026-11-21 22:30:00 "+now.Format("MST")+", token 5"; got != want {
		t.Errorf("heldBy = %q; want %q", got, want)
	}
	h.Since = now.Add(-time.Hour)
	if got, want := HeldBy(h, now), "held by web-1:42 since 22:30:00 "+now.Format("MST")+", token 5"; got != want {
		t.Errorf("heldBy = %q; want %q", got, want)
	}
}

// A hold whose end has passed, on a store that has yet to free the lease
// (etcd), says it is over rather than naming a past time as if to come.
func TestHeldByHoldOver(t *testing.T) {
	now := time.Date(2026, 11, 22, 23, 30, 0, 0, time.Local)
	h := lease.Holder{Label: "web-1:42", Since: now.Add(-5 * time.Second), Token: 5, HeldUntil: now.Add(time.Second)}
	if got := HeldBy(h, now); !strings.HasSuffix(got, "by --hold-at-least") {
		t.Errorf("a hold to come: %q", got)
	}
	h.HeldUntil = now.Add(-time.Second)
	if got := HeldBy(h, now); !strings.HasSuffix(got, "by --hold-at-least (over; the store has yet to free it)") {
		t.Errorf("a hold over: %q", got)
	}
	if got := HoldText(h.HeldUntil, now); !strings.HasSuffix(got, "by --hold-at-least (over; the store has yet to free it)") {
		t.Errorf("status of a hold over: %q", got)
	}
	if got := HoldText(now.Add(1500*time.Millisecond), now); !strings.HasSuffix(got, "(in 1.5s) by --hold-at-least") {
		t.Errorf("status of a hold to come: %q", got)
	}
}
