package filelease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// A watch of a lease sees its slots' changes: a release of slot 2 ends
// Next at once (it saw only slot 0's lock file before, so a watch missed
// slots' releases until its next poll).
func TestWatchChangesSeesSlots(t *testing.T) {
	t.Parallel()
	s := openT(t, t.TempDir())
	l := acquireT(t, s, lease.SlotName("w", 2))
	other := acquireT(t, s, "w.x") // another lease's changes are not the watch's
	c, err := s.WatchChanges(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := other.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if err := c.Next(ctx, nil, nil); err != nil {
			t.Fatalf("Next after slot 2's release: %v; want it to return at the release's events", err)
		}
		if st, _ := s.Status(ctx, lease.SlotName("w", 2)); st == nil {
			return
		}
	}
}

// A file planted on one slot (a FIFO at NAME~1.lock) takes only that slot
// away: with slot 0 held, an acquirer of 3 slots takes slot 2, and with
// every usable slot held it waits for them rather than failing; only a
// lease whose every slot is unusable is refused, naming the file. (The
// first unusable slot failed the whole acquisition: 3 slots became 1.)
func TestPlantedSlotSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := context.Background()
	req := func(label string) lease.Request {
		return lease.Request{Name: "p", Label: label, ID: lease.NewID(), Slots: 3}
	}
	acq := func(label string, wait time.Duration) (lease.Lease, error) {
		a, err := lease.Acquire(ctx, s, req(label), lease.AcquireOptions{Wait: wait, CallTimeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		return a.Lease, nil
	}
	first, err := acq("a", 0)
	if err != nil || first.Info().Slot != 0 {
		t.Fatalf("first acquisition: %v", err)
	}
	if err := unix.Mkfifo(s.Path(lease.SlotName("p", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := acq("b", 0)
	if err != nil {
		t.Fatalf("with slot 1 a FIFO and slot 2 free: %v; want slot 2", err)
	}
	if k := second.Info().Slot; k != 2 {
		t.Fatalf("took slot %d; want 2", k)
	}
	// Every usable slot held: a waiter waits, and takes slot 0 once freed.
	got := make(chan error, 1)
	go func() {
		l, err := acq("c", time.Minute)
		if err == nil {
			if l.Info().Slot != 0 {
				err = fmt.Errorf("took slot %d; want 0", l.Info().Slot)
			}
			_ = l.Release(ctx)
		}
		got <- err
	}()
	_, err = acq("d", 0)
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("with the usable slots held: %v; want held", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	_ = second.Release(ctx)
	// Every slot unusable: refused, naming a planted file.
	for _, k := range []int{0, 2} {
		p := s.Path(lease.SlotName("p", k))
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := acq("e", 0); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "FIFO") {
		t.Fatalf("with every slot a FIFO: %v; want a configuration error naming one", err)
	}
}
