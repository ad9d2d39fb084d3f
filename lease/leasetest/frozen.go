package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// FrozenRenew checks l.Renew against a store server the caller has frozen
// (SIGSTOP), in two subtests: CallTimeout (no caller deadline: the store's
// call timeout, callTimeout, ends the call) and CallerDeadline (the caller's
// earlier deadline ends it). Each must fail within its limit plus slack
// (scheduling on a busy machine) with an error that wraps
// lease.ErrUnavailable and not lease.ErrLost: a frozen server says nothing
// about the lease.
func FrozenRenew(t *testing.T, l lease.Lease, callTimeout, callerDeadline, slack time.Duration) {
	t.Helper()
	for _, tc := range []struct {
		name  string
		ctx   time.Duration // caller's deadline; 0 = none
		limit time.Duration
	}{
		{"CallTimeout", 0, callTimeout},
		{"CallerDeadline", callerDeadline, callerDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			start := time.Now()
			err := l.Renew(ctx)
			took := time.Since(start)
			t.Logf("Renew against a frozen server returned after %v: %v", took, err)
			if err == nil || errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrUnavailable) {
				t.Fatalf("Renew: %v; want ErrUnavailable, not ErrLost", err)
			}
			if took > tc.limit+slack {
				t.Fatalf("Renew took %v; want at most %v", took, tc.limit+slack)
			}
		})
	}
}
