package leasetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
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

// Freeze stops a server process with SIGSTOP and returns once every one of
// its threads is stopped: kill(2) only queues the signal, and a thread that
// is running on another CPU may still answer a request meanwhile (an etcd
// renewal sent just after the kill was seen to succeed). t.Cleanup resumes it;
// Thaw does so earlier.
func Freeze(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	WaitStopped(t, pid)
}

// Thaw resumes a process Freeze stopped.
func Thaw(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %d: %v", pid, err)
	}
}

// WaitStopped waits until every thread of pid is in the stopped state (T in
// /proc/PID/task/TID/stat) or pid is gone, polling the kernel's view every millisecond for
// at most 10 s.
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !allStopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is not stopped 10s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist) // gone counts as stopped
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread exited
		}
		// PID (COMM) STATE ...: COMM may hold spaces and parentheses.
		// A zombie (Z) or dying (X) process runs no more either: a server
		// backend that was exiting when the signal came never shows T.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || !strings.ContainsRune("TtZX", rune(b[i+2])) {
			return false
		}
	}
	return true
}
