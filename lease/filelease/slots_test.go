package filelease

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// recordKeys reads the lock file at path and returns its record's fields.
func recordKeys(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return slices.Sorted(maps.Keys(m))
}

// TestOneSlotBytes: a lease taken with one slot writes the lock file a
// lease without slots does (the same fields, the same label) and nothing
// else; with three slots, the slots' files and the shared counter, which
// holds the last token given.
func TestOneSlotBytes(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	plain, err := s.TryAcquire(ctx, lease.Request{Name: "plain", Label: "h", ID: lease.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	one, err := lease.Acquire(ctx, s, lease.Request{Name: "one", Label: "h", Slots: 1}, lease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := recordKeys(t, s.Path("plain")), recordKeys(t, s.Path("one")); !slices.Equal(a, b) {
		t.Fatalf("record fields with one slot %v; without slots %v", b, a)
	}
	b, _ := os.ReadFile(s.Path("one"))
	if !strings.Contains(string(b), `"holder":"h",`) {
		t.Fatalf("the record with one slot %s does not carry the plain label", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "~") {
			t.Errorf("one slot wrote %s", e.Name())
		}
	}
	for _, l := range []lease.Lease{plain, one.Lease} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var last uint64
	var held []lease.Lease
	for range 3 {
		acq, err := lease.Acquire(ctx, s, lease.Request{Name: "three", Label: "h", Slots: 3}, lease.AcquireOptions{})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, acq.Lease)
		last = acq.Lease.Info().Token
	}
	b, err = os.ReadFile(s.tokenPath("three"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.FormatUint(last, 10) {
		t.Fatalf("shared counter %q, %v; want the last token %d", b, err, last)
	}
	for k := 1; k < 3; k++ {
		if _, err := os.Stat(s.Path(lease.SlotName("three", k))); err != nil {
			t.Errorf("slot %d: %v", k, err)
		}
	}
	for _, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSlotWaitWakesOnAnySlot: a waiter for a lease whose three slots are
// held is woken by the release of any of them through inotify (one
// instance watches them all), not by a poll.
func TestSlotWaitWakesOnAnySlot(t *testing.T) {
	dir := t.TempDir()
	holders, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holders.Close()
	ctx := context.Background()
	var held []lease.Lease
	for range 3 {
		acq, err := lease.Acquire(ctx, holders, lease.Request{Name: "job", Label: "h", Slots: 3}, lease.AcquireOptions{})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, acq.Lease)
	}
	waiter, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	armed := make(chan struct{}, 1)
	f := func() {
		select {
		case armed <- struct{}{}:
		default:
		}
	}
	waitArmed.Store(&f)
	defer waitArmed.Store(nil)
	got := make(chan *lease.Acquired, 1)
	go func() {
		acq, err := lease.Acquire(ctx, waiter, lease.Request{Name: "job", Label: "w", Slots: 3}, lease.AcquireOptions{Wait: lease.WaitForever})
		if err != nil {
			t.Error(err)
		}
		got <- acq
	}()
	<-armed
	start := time.Now()
	if err := held[2].Release(ctx); err != nil {
		t.Fatal(err)
	}
	acq := <-got
	if acq == nil {
		return
	}
	if acq.Lease.Info().Slot != 2 || waiter.events.Load() == 0 {
		t.Fatalf("took slot %d after %d inotify events; want slot 2, woken by an event", acq.Lease.Info().Slot, waiter.events.Load())
	}
	t.Logf("slot 2 taken %v after its release", time.Since(start))
	for _, l := range []lease.Lease{held[0], held[1], acq.Lease} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
