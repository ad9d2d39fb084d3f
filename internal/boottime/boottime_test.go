package boottime

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepUntil(t *testing.T) {
	var c Clock = Boot{}
	at := c.Now() + 20*time.Millisecond
	if err := c.SleepUntil(context.Background(), at); err != nil {
		t.Fatalf("SleepUntil: %v", err)
	}
	if now := c.Now(); now < at {
		t.Fatalf("woke at %v, before %v", now, at)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.SleepUntil(ctx, c.Now()+time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("SleepUntil with a cancelled context: %v", err)
	}
}
