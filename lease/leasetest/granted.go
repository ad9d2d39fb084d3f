package leasetest

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// CheckGranted fails t unless h, an acquisition made with the store's
// fencing counter ahead of its clock (but within lease.MaxClockSkew), says
// when it was granted on the store's clock (Holder.Granted), not on the
// token's: within slack of this host's clock (the test servers run on this
// host; Azure's Date counts whole seconds), while the token is further
// ahead than that. --once-per decides periods from Granted.
func CheckGranted(t testing.TB, h lease.Holder, slack time.Duration) {
	t.Helper()
	now := time.Now()
	if h.Granted.IsZero() || h.Granted.Before(now.Add(-slack)) || h.Granted.After(now.Add(slack)) {
		t.Fatalf("Granted %v; want the store's clock at the grant, within %v of %v", h.Granted, slack, now)
	}
	if lease.TokenTime(h.Token).Sub(h.Granted) <= slack {
		t.Fatalf("token %d (%v) is not ahead of the grant %v: the check needs a counter ahead of the clock", h.Token, lease.TokenTime(h.Token), h.Granted)
	}
}
