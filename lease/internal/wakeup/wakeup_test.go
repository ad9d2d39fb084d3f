package wakeup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func TestJitterBounds(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Hour} {
		hi := time.Millisecond + min(d/20, 25*time.Millisecond)
		for range 100 {
			if j := Jitter(d); j < time.Millisecond || j > hi {
				t.Fatalf("Jitter(%v) = %v, want within [1ms, %v]", d, j, hi)
			}
		}
	}
}

func TestSleepWakesOnChannelAndContext(t *testing.T) {
	wake := make(chan struct{})
	close(wake)
	if err := Sleep(context.Background(), time.Hour, wake); err != nil {
		t.Errorf("closed wake: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0, nil); err != nil {
		t.Errorf("elapsed: %v", err)
	}
}

func TestPoll(t *testing.T) {
	held := func(r time.Duration) *lease.HeldError {
		h := &lease.HeldError{}
		h.By.Remaining = r
		return h
	}
	for _, tc := range []struct {
		held *lease.HeldError
		want time.Duration
	}{
		{nil, 2 * time.Second},
		{held(0), 2 * time.Second},
		{held(time.Second), time.Second},
		{held(time.Minute), 2 * time.Second},
	} {
		if got := Poll(tc.held, 2*time.Second); got != tc.want {
			t.Errorf("Poll(%v) = %v, want %v", tc.held, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	var b Backoff
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		w *= time.Millisecond
		if p := b.Next(); p < w || p > w+w/2 {
			t.Fatalf("pause %d = %v, want within [%v, %v]", i, p, w, w+w/2)
		}
	}
	b.Reset()
	if p := b.Next(); p < 100*time.Millisecond || p > 150*time.Millisecond {
		t.Fatalf("after Reset: %v, want within [100ms, 150ms]", p)
	}
}

// A waiter registered while the subscription was down wakes when it comes
// up: a release before that went unnoticed. One registered after it came
// up waits for a release.
func TestUpWakesWaitersRegisteredWhileDown(t *testing.T) {
	l := New(nil, false)
	before := l.Register("job")
	l.Up()
	select {
	case <-before:
	default:
		t.Fatal("the subscription came up and a waiter registered before it still sleeps")
	}
	after := l.Register("job")
	select {
	case <-after:
		t.Fatal("a waiter registered once the subscription was up woke without a release")
	default:
	}
	l.Notify("job")
	select {
	case <-after:
	default:
		t.Fatal("a release did not wake its waiter")
	}
}
