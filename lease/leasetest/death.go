package leasetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// deathWatcherEnv marks a test binary re-executed as a death watcher.
const deathWatcherEnv = "LEADERRUN_TEST_DEATH_WATCHER"

// Death is when a process ended, as a waiter the kernel woke stamped it.
type Death struct {
	// Boot is the moment on CLOCK_BOOTTIME (the clock of lease.BootClock
	// and of every deadline of leaderrun).
	Boot time.Duration
	// Wall is the same moment on the wall clock, for comparison with
	// the times leaderrun logs.
	Wall time.Time
	// Realtime says the waiter ran SCHED_FIFO, so no CPU hog of normal
	// priority could delay its stamp.
	Realtime bool
}

// WatchDeath returns a channel that receives when pid ends (exits or is
// killed; it need not be a child of the test, and its reaping does not
// matter). The time comes from the kernel's wake-up, not from a polling
// loop: a pidfd of pid (opened here, at once, so a PID reused later is
// never watched) is handed to a watcher process (the test binary
// re-executed; its TestMain must call DeathWatcherMain first) whose only
// thread of interest is blocked in poll(2) on it, runs SCHED_FIFO where
// the test may raise it, and stamps CLOCK_BOOTTIME and the wall clock the
// moment it wakes. Neither the test's goroutines nor its Go scheduler nor a
// busy machine can delay that stamp, so it is at most a scheduling
// wake-up after the death and never before it. WatchDeath returns once the
// watcher is about to poll (a death before that would be stamped late). The
// watcher is stopped at cleanup; if pid is already gone, the test fails
// (its death time cannot be known).
func WatchDeath(t testing.TB, pid int) <-chan Death {
	t.Helper()
	cmd, r := startDeathWatcher(t, pid)
	ch := make(chan Death, 1)
	armed := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer r.Close()
		var word string
		if _, err := fmt.Fscan(r, &word); err != nil || word != "armed" {
			return // stopped at cleanup, or the watcher failed (it said why on stderr)
		}
		close(armed)
		var boot, wall int64
		var rt bool
		if _, err := fmt.Fscan(r, &boot, &wall, &rt); err != nil {
			return
		}
		ch <- Death{Boot: time.Duration(boot), Wall: time.Unix(0, wall), Realtime: rt}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-done
	})
	// A watcher that started polling only after the death would stamp its
	// own start: wait until it is about to poll.
	select {
	case <-armed:
	case <-done:
		t.Fatal("the death watcher ended before it was armed")
	case <-time.After(time.Minute):
		t.Fatal("the death watcher was not armed within a minute")
	}
	return ch
}

// startDeathWatcher starts the death watcher process of pid, with the read
// end of its stdout, where it says when it is armed and then the death.
func startDeathWatcher(t testing.TB, pid int) (*exec.Cmd, *os.File) {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v (the process must still run when its death is watched)", pid, err)
	}
	fd := os.NewFile(uintptr(pidfd), "pidfd")
	r, w, err := os.Pipe()
	if err != nil {
		fd.Close()
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), deathWatcherEnv+"=1")
	cmd.ExtraFiles = []*os.File{fd} // fd 3
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	fd.Close()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatalf("starting the death watcher: %v", err)
	}
	return cmd, r
}

// DeathWatcherMain runs the death watcher of WatchDeath and exits when the
// test binary was started as one; otherwise it returns at once. Call it
// first in TestMain.
func DeathWatcherMain() {
	if os.Getenv(deathWatcherEnv) == "" {
		return
	}
	runtime.LockOSThread()
	// Priority 1 is above every normal thread and below the kernel's own
	// real-time threads; refused without CAP_SYS_NICE (then the stamp can be
	// late by a CPU hog's time slice, never early).
	rt := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 1 /* SCHED_FIFO */, Priority: 1}, 0) == nil
	fds := []unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
	fmt.Println("armed")
	for {
		_, err := unix.Poll(fds, -1)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			fmt.Fprintln(os.Stderr, "death watcher: poll:", err)
			os.Exit(2)
		}
	}
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	wall := time.Now().UnixNano()
	fmt.Println(strings.Join([]string{strconv.FormatInt(ts.Nano(), 10), strconv.FormatInt(wall, 10), strconv.FormatBool(rt)}, " "))
	os.Exit(0)
}
