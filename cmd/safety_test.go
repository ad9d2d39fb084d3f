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

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// The store under this scheme is the conformance-tested fake on the real
// boot clock; tests script its renewals.
var memStore atomic.Pointer[leasetest.MemStore]

func init() {
	storeOpeners["memtest"] = func(context.Context, string, lease.OpenOptions) (lease.Store, error) {
		return memStore.Load(), nil
	}
}

// The whole chain (acquire → keeper → runner) with renewals that hang after
// the first: a child that ignores SIGTERM must be dead before the lease could
// expire in the store, i.e. before t_s + L·(1−ρ) − ε, and leaderrun exits 124.
func TestChildDeadBeforeLeaseExpires(t *testing.T) {
	var renewals atomic.Int32
	s := &leasetest.MemStore{Epsilon: 5 * time.Millisecond}
	s.OnRenew = func(ctx context.Context, id string) error {
		if renewals.Add(1) == 1 {
			return nil
		}
		<-ctx.Done() // the store stops answering
		return ctx.Err()
	}
	memStore.Store(s)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	const ttl = 2 * time.Second
	before := lease.BootClock{}.Now() // ≤ the acquire's t_s
	code, _, errOut := runCapture(t, "--store", "memtest://", "--name", "safety", "--ttl", ttl.String(), "--renew-every", "400ms", "--grace", "300ms", "--",
		"sh", "-c", `trap '' TERM; echo $$ > `+pidFile+`; while :; do sleep 0.05; done`)
	returned := lease.BootClock{}.Now()
	if code != ExitLost {
		t.Fatalf("exit %d; want %d (stderr %q)", code, ExitLost, errOut)
	}
	if !strings.Contains(errOut, "SIGKILL") || !strings.Contains(errOut, "lost") {
		t.Fatalf("final line does not say the lease was lost and SIGKILL was needed: %q", errOut)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if processAlive(pid) {
		t.Fatalf("child %d still alive after leaderrun returned", pid)
	}
	// The last confirmed renewal was sent at t_s1 ≥ before + 400ms; E is
	// measured from it. The child must be gone (and leaderrun back) before
	// the earliest E we can be sure of.
	validity := time.Duration(float64(ttl)*0.99) - s.Epsilon
	deadline := before + 400*time.Millisecond + validity
	if returned > deadline {
		t.Fatalf("leaderrun returned %v after the lease could have expired", returned-deadline)
	}
	if renewals.Load() < 2 {
		t.Fatalf("only %d renewals attempted; the hang was never exercised", renewals.Load())
	}
}

func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i+2 < len(s) && s[i+2] != 'Z'
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
	storeOpeners["sigtest"] = func(context.Context, string, lease.OpenOptions) (lease.Store, error) {
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
	storeOpeners["lostgrants"] = func(context.Context, string, lease.OpenOptions) (lease.Store, error) { return s, nil }
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

// A flag the store could not honour is refused, never silently ignored
// (every store of this build has standbys and holds; a store without them
// is modelled by the in-memory one).
func TestFlagsTheStoreCannotHonour(t *testing.T) {
	s := &leasetest.MemStore{}
	if err := checkPriority(s, 5); err == nil || !strings.Contains(err.Error(), "--priority 5: this store keeps no list of standbys") {
		t.Fatalf("checkPriority = %v", err)
	}
	if err := checkPriority(s, 0); err != nil {
		t.Fatalf("checkPriority(0) = %v", err)
	}
	reg := &leasetest.MemCandidates{MemStore: s}
	if err := checkPriority(reg, 5); err != nil {
		t.Fatalf("checkPriority on a registry = %v", err)
	}
}
