package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// The store under this scheme is the conformance-tested fake on the real
// boot clock; tests script its renewals.
var memStore atomic.Pointer[leasetest.MemStore]

func init() {
	storeOpeners["memtest"] = func(context.Context, string, lease.FlagSpeller, lease.OpenOptions) (lease.Store, error) {
		return memStore.Load(), nil
	}
}

// The whole chain (acquire → keeper → runner) with renewals that hang after
// the first: a child that ignores SIGTERM must be dead before the lease
// expires in the store, and leaderrun exits 124. Both ends come from their
// owners: the child's death from the kernel (leasetest.WatchDeath: a pidfd
// waiter's stamp on CLOCK_BOOTTIME), the lease's end from the store (its
// expiry on the same clock, read once no renewal can move it any more), so
// a busy machine can delay neither measure into a false verdict.
func TestChildDeadBeforeLeaseExpires(t *testing.T) {
	var renewals atomic.Int32
	var storeEnd atomic.Int64 // the store's expiry (boot clock, ns) once renewals hang
	s := &leasetest.MemStore{Epsilon: 5 * time.Millisecond}
	s.OnRenew = func(ctx context.Context, id string) error {
		if renewals.Add(1) == 1 {
			return nil
		}
		if storeEnd.Load() == 0 {
			// Nothing renews from now on: the expiry is final. Remaining is
			// counted on the store's clock after asked; asked + Remaining
			// is never later than the expiry.
			asked := lease.BootClock{}.Now()
			if h, err := s.Status(context.Background(), "safety"); err == nil && h != nil {
				storeEnd.Store(int64(asked + h.Remaining))
			}
		}
		<-ctx.Done() // the store stops answering
		return ctx.Err()
	}
	memStore.Store(s)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	type result struct {
		code   int
		errOut string
	}
	res := make(chan result, 1)
	go func() {
		code, _, errOut := runCapture(t, "--store", "memtest://", "--name", "safety", "--ttl", ttl.String(), "--renew-every", "400ms", "--grace", "300ms", "--",
			"sh", "-c", `trap '' TERM; echo $$ > `+fifo+`; while :; do sleep 0.05; done`)
		res <- result{code, errOut}
	}()
	pid := readPIDFromFIFO(t, fifo, res)
	died := leasetest.WatchDeath(t, pid)
	r := <-res
	if r.code != run.ExitLost {
		t.Fatalf("exit %d; want %d (stderr %q)", r.code, run.ExitLost, r.errOut)
	}
	if !strings.Contains(r.errOut, "SIGKILL") || !strings.Contains(r.errOut, "lost") {
		t.Fatalf("final line does not say the lease was lost and SIGKILL was needed: %q", r.errOut)
	}
	var death leasetest.Death
	select {
	case death = <-died:
	case <-time.After(10 * time.Second):
		t.Fatalf("child %d still alive 10s after leaderrun returned", pid)
	}
	if renewals.Load() < 2 || storeEnd.Load() == 0 {
		t.Fatalf("%d renewals attempted, store's expiry read: %v; the hang was never exercised", renewals.Load(), storeEnd.Load() != 0)
	}
	margin := time.Duration(storeEnd.Load()) - death.Boot
	t.Logf("child dead %v before the store's expiry (stamp realtime: %v)", margin.Round(time.Millisecond), death.Realtime)
	if margin <= 0 {
		t.Fatalf("the child died %v AFTER the store expired the lease", -margin)
	}
}

// readPIDFromFIFO reads the PID a child writes to fifo (its write blocks
// until read, so the child is alive when the PID arrives). If the run ends
// first (res receives; it is sent back), the test fails.
func readPIDFromFIFO[R any](t *testing.T, fifo string, res chan R) int {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // blocks until the child opens it
		got <- string(b)
	}()
	select {
	case b := <-got:
		pid, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil {
			t.Fatalf("the child wrote %q to its PID fifo", b)
		}
		return pid
	case r := <-res:
		// Unblock the reader (a writer that opens and closes at once).
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-got
		t.Fatalf("leaderrun returned before the child wrote its PID: %+v", r)
		return 0
	}
}

// signalOnAcquire is a store that grants the lease just as SIGTERM arrives.
type signalOnAcquire struct{ *leasetest.MemStore }

func (s signalOnAcquire) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := s.MemStore.TryAcquire(context.Background(), req)
	if err != nil {
		return nil, err
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	<-ctx.Done() // the signal has been seen; the grant still comes back
	return l, nil
}

// A signal that races with a successful acquire must not be swallowed: the
// child is not started, the lease is released, and leaderrun exits 128+15.
func TestSignalDuringHandoffStartsNothing(t *testing.T) {
	s := &leasetest.MemStore{}
	storeOpeners["sigtest"] = func(context.Context, string, lease.FlagSpeller, lease.OpenOptions) (lease.Store, error) {
		return signalOnAcquire{s}, nil
	}
	marker := filepath.Join(t.TempDir(), "started")
	code, _, errOut := runCapture(t, "--store", "sigtest://", "--name", "hs", "--", "touch", marker)
	if code != 128+int(syscall.SIGTERM) || !strings.Contains(errOut, "not started") {
		t.Fatalf("exit %d, stderr %q; want 143 and 'not started'", code, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child was started after SIGTERM")
	}
	if h, _ := s.Status(context.Background(), "hs"); h != nil {
		t.Fatalf("lease still held by %+v after the interrupted start", h)
	}
}

// lostGrants grants the first acquisitions but loses the answers (each
// arrives after a while, as an error), as a store that froze just after
// granting would; leaderrun's validity then counts from the first attempt.
type lostGrants struct {
	*leasetest.MemStore
	acquires atomic.Int32
	lost     int32
	delay    time.Duration
}

func (s *lostGrants) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	l, err := s.MemStore.TryAcquire(ctx, req)
	if n := s.acquires.Add(1); err == nil && n <= s.lost {
		time.Sleep(s.delay) // the fault: the answer is slow, then lost
		return nil, fmt.Errorf("%w: no answer in time", lease.ErrUnavailable)
	}
	return l, err
}

// A lease granted with too little runway (its answers were lost, so validity
// counts from the first attempt) whose runway renewal is not answered either:
// a standby lets it go and waits again instead of exiting 125 (found by the
// chaos run: a Redis freeze just after an acquisition).
func TestNoRunwayWaitsAgain(t *testing.T) {
	var renewals atomic.Int32
	mem := &leasetest.MemStore{Epsilon: 5 * time.Millisecond}
	mem.OnRenew = func(ctx context.Context, id string) error {
		if renewals.Add(1) == 1 {
			return fmt.Errorf("%w: no answer in time", lease.ErrUnavailable)
		}
		return nil
	}
	// --ttl 2s: validity 1.975s, and the child needs more than K + grace +
	// renew-every = 1.257s of it; three lost answers of 250ms each plus the
	// retry pauses (at least 350ms) leave less.
	s := &lostGrants{MemStore: mem, lost: 3, delay: 250 * time.Millisecond}
	storeOpeners["lostgrants"] = func(context.Context, string, lease.FlagSpeller, lease.OpenOptions) (lease.Store, error) {
		return s, nil
	}
	marker := filepath.Join(t.TempDir(), "ran")
	code, _, errOut := runCapture(t, "--store", "lostgrants://", "--ttl", "2s", "--name", "slow", "--", "touch", marker)
	if code != 0 {
		t.Fatalf("exit %d; want the child run after waiting again (stderr %q)", code, errOut)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the child never ran")
	}
	// The runway renewal either went unanswered (OnRenew) or had no time
	// left at all (its deadline had passed): either way, a second
	// acquisition after the lost ones.
	if !strings.Contains(errOut, "waiting again") || s.acquires.Load() <= s.lost+1 {
		t.Fatalf("no second acquisition (%d attempts) or no line saying it waits again: %q", s.acquires.Load(), errOut)
	}
}
