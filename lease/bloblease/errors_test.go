package bloblease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The end of one call's deadline (Acquire's or the keeper's bound on a call)
// is an outage to retry, not the caller giving up: found by the chaos run,
// where waiters exited 125 while Azurite was frozen. A cancelled caller is
// not the store's fault.
func TestClassifyCallDeadline(t *testing.T) {
	s := &Store{where: "http://127.0.0.1:1/acct/c", callTimeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	err := s.classify(ctx, "acquire x", context.DeadlineExceeded, nil)
	if !errors.Is(err, lease.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call deadline passed: %v; want ErrUnavailable and DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	err = s.classify(ctx, "acquire x", context.Canceled, nil)
	if errors.Is(err, lease.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("caller cancelled: %v; want Canceled, not ErrUnavailable", err)
	}
}
