package cmd

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// A store that does not answer --once-per's read of the run history in
// time (twice, as a starved etcd did) is read again while the lease is
// held: the period's run starts, rather than the tick exiting 125 with
// the store up.
func TestOncePerSlowHistoryReadIsAWait(t *testing.T) {
	var reads atomic.Int32
	s := &leasetest.MemStore{}
	s.OnRuns = func(ctx context.Context) error {
		if reads.Add(1) <= 2 {
			<-ctx.Done() // no answer within the call timeout
			return ctx.Err()
		}
		return nil
	}
	memStore.Store(s)
	code, stdout, stderr := runCapture(t, "--store", "memtest://", "--name", "slowhist", "--call-timeout", "200ms", "--once-per", "daily", "--", "echo", "ran")
	if code != 0 || strings.TrimSpace(stdout) != "ran" || strings.Contains(stderr, "cannot read the run history") {
		t.Fatalf("exit %d, stdout %q: %s; want the run (exit 0, ran) after the history was read again", code, stdout, stderr)
	}
	if n := reads.Load(); n < 3 {
		t.Fatalf("the history was read %d times; want the two unanswered reads and a third", n)
	}
}
