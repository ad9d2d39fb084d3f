package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/boottime"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

func startGuard(t *testing.T) *runner.Guard {
	t.Helper()
	g, err := runner.StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Disarm)
	return g
}

// treeScript starts two background sleeps and prints "kid PID" for each,
// then "ready PID" for itself, and waits.
const treeScript = `sleep 300 & echo "kid $!"; sleep 300 & echo "kid $!"; echo "ready $$"; wait`

// When leaderrun's end of the socket closes without a disarm (leaderrun
// died), the guard SIGKILLs the whole group at once.
func TestGuardKillsTreeWhenOwnerGoes(t *testing.T) {
	t.Parallel()
	g := startGuard(t)
	c := startRun(t, runner.Config{Args: []string{"sh", "-c", treeScript}, Guard: g, Grace: time.Hour})
	kids := []int{c.expectPID("kid "), c.expectPID("kid "), c.expectPID("ready ")}
	<-g.Armed() // see Guard.Arm for the instant before it
	g.Abandon()
	for _, fd := range kids {
		if !exited(t, fd, 5*time.Second) {
			t.Fatal("a process of the tree outlived the guard's owner")
		}
	}
	res, err := c.result()
	if err != nil || res.Signal != syscall.SIGKILL {
		t.Fatalf("Run = %+v, %v; want the child SIGKILLed by the guard", res, err)
	}
}

// The guard keeps a duplicate of a lock descriptor: the flock outlives the
// owner's copy and is let go only once the tree is gone.
func TestGuardHoldsLockUntilTreeGone(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	g := startGuard(t)
	if err := g.Hold(f); err != nil {
		t.Fatal(err)
	}
	f.Close() // our copy; the guard's keeps the lock
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
		t.Fatalf("flock by another open file = %v; want EWOULDBLOCK while the guard holds the lock", err)
	}
	c := startRun(t, runner.Config{Args: []string{"sh", "-c", treeScript}, Guard: g, Grace: time.Hour})
	kids := []int{c.expectPID("kid "), c.expectPID("kid "), c.expectPID("ready ")}
	<-g.Armed() // see Guard.Arm for the instant before it
	g.Abandon()
	// Abandon returns once the guard exited, and the guard exits only after
	// the tree is gone: the lock must be free and every process gone now.
	for _, fd := range kids {
		if !exited(t, fd, 0) {
			t.Fatal("the guard let the lock go while a process of the tree still ran")
		}
	}
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("flock after the guard exited: %v", err)
	}
}

// The guard timing of the deadline tests: stop signal TERM, grace and K.
const grace, k = 400 * time.Millisecond, 250 * time.Millisecond

// guardedSigrec runs a child that catches TERM and prints it, under a guard
// told the timing above; runGrace is Run's own grace. It returns the guard,
// the run and a pidfd of the child.
func guardedSigrec(t *testing.T, runGrace time.Duration) (*runner.Guard, *child, int) {
	t.Helper()
	g := startGuard(t)
	if err := g.Timing(syscall.SIGTERM, grace, k); err != nil {
		t.Fatal(err)
	}
	args, env := helperArgs(t, "sigrec")
	c := startRun(t, runner.Config{Args: args, Env: env, Guard: g, Grace: runGrace})
	return g, c, c.expectPID("ready ")
}

// At the stop point without a newer deadline (leaderrun frozen), the guard
// sends the stop signal, then SIGKILL at E−K; a deadline that arrives after
// the stop signal does not move the kill back.
func TestGuardStopAndKillPoints(t *testing.T) {
	t.Parallel()
	clock := boottime.Boot{}
	g, c, pid := guardedSigrec(t, time.Hour)
	e := clock.Now() + 1500*time.Millisecond
	g.Until(e)
	c.expect("signal SIGTERM")
	termAt := clock.Now()
	if stopAt := e - k - grace; termAt < stopAt {
		t.Fatalf("stop signal %v before the stop point", stopAt-termAt)
	}
	g.Until(e + time.Hour) // too late: the stop has begun
	if !exited(t, pid, e-clock.Now()+time.Second) {
		t.Fatal("the child was not killed at the kill point")
	}
	diedAt := clock.Now()
	if diedAt < e-k {
		t.Fatalf("killed %v before the kill point", e-k-diedAt)
	}
	t.Logf("stop signal %v after E-K-G, death seen %v after E-K", termAt-(e-k-grace), diedAt-(e-k))
	if res, _ := c.result(); res.Signal != syscall.SIGKILL {
		t.Fatalf("child ended with %+v; want SIGKILL", res)
	}
}

// When leaderrun runs the stop sequence itself, the guard does not send the
// stop signal a second time. leaderrun begins it half a grace before the
// guard's stop point, so the guard's point falls inside the grace that
// leaderrun's own SIGKILL ends: a guard that ignored "stopping" would signal
// then. (Begun at the very point, the guard's 50 ms slack is a latency budget
// that a loaded machine breaks, and a second SIGTERM is then harmless.)
func TestGuardNoDoubleStopSignal(t *testing.T) {
	t.Parallel()
	clock := boottime.Boot{}
	g, c, _ := guardedSigrec(t, grace)
	e := clock.Now() + time.Second
	g.Until(e)
	if err := clock.SleepUntil(context.Background(), e-k-grace-grace/2); err != nil {
		t.Fatal(err)
	}
	c.cancel(lease.ErrLost) // leaderrun's own keeper fires
	c.expect("signal SIGTERM")
	res, _ := c.result()
	for l := range c.lines {
		if strings.HasPrefix(l, "signal SIGTERM") {
			t.Fatalf("the child got the stop signal twice (Run %+v)", res)
		}
	}
}

// Died closes when the guard process dies before Disarm.
func TestGuardDied(t *testing.T) {
	t.Parallel()
	g := startGuard(t)
	if err := syscall.Kill(g.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Died():
	case <-time.After(10 * time.Second):
		t.Fatal("Died did not close after the guard was killed")
	}
}

// Disarm ends the guard and leaves the tree alone; Died stays open.
func TestGuardDisarm(t *testing.T) {
	t.Parallel()
	g, err := runner.StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	gfd := pidfd(t, g.PID())
	g.Disarm()
	if !exited(t, gfd, 0) {
		t.Fatal("the guard still runs after Disarm returned")
	}
	select {
	case <-g.Died():
		t.Fatal("Died closed after a Disarm")
	default:
	}
}

// Dismiss SIGKILLs the guard without reaping it: the guard exits (its
// pidfd says so) while the caller goes on, and the Disarm after it reaps it
// (the process is then gone from the process table, not a zombie).
func TestGuardDismissThenDisarm(t *testing.T) {
	t.Parallel()
	g, err := runner.StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	gfd := pidfd(t, g.PID())
	g.Dismiss()
	if !exited(t, gfd, time.Minute) {
		t.Fatal("the guard still runs a minute after Dismiss")
	}
	// Exited, not yet reaped: a zombie still holds its PID.
	if err := unix.Waitid(unix.P_PIDFD, gfd, &unix.Siginfo{}, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("the dismissed guard was already reaped: %v", err)
	}
	g.Dismiss() // idempotent
	g.Disarm()
	if err := unix.Waitid(unix.P_PIDFD, gfd, &unix.Siginfo{}, unix.WEXITED|unix.WNOWAIT, nil); err != unix.ECHILD {
		t.Fatalf("after Disarm, waitid on the guard = %v; want ECHILD (reaped)", err)
	}
	g.Disarm() // idempotent
	select {
	case <-g.Died():
		t.Fatal("Died closed after a Dismiss")
	default:
	}
}

// A daemon that calls setsid stays in the child's cgroup: Run stops it after
// the child exits, and the tree is gone only when the cgroup is empty.
func TestCgroupContainsSetsidDaemon(t *testing.T) {
	t.Parallel()
	cg, err := runner.NewCgroup()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup containment in CI: %v", err)
		}
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	t.Cleanup(func() {
		if err := cg.Remove(); err != nil {
			t.Errorf("remove %s: %v", cg.Path(), err)
		}
	})
	c := startRun(t, runner.Config{
		Args:   []string{"sh", "-c", `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo "daemon $!"; exit 0`},
		Cgroup: cg, Grace: time.Second,
	})
	daemon := c.expectPID("daemon ")
	res, err := c.result()
	if err != nil || !res.GroupGone {
		t.Fatalf("Run = %+v, %v; want the tree confirmed gone", res, err)
	}
	if !exited(t, daemon, 0) {
		t.Fatal("the setsid daemon outlived Run")
	}
	if pop, err := cg.Populated(); err != nil || pop {
		t.Fatalf("cgroup populated=%v (%v) after Run", pop, err)
	}
}

// BenchmarkStartGuard is what the guard adds to a run's critical path:
// starting it (fork and exec; Start returns once exec succeeded) and
// disarming it.
func BenchmarkStartGuard(b *testing.B) {
	for b.Loop() {
		g, err := runner.StartGuard()
		if err != nil {
			b.Fatal(err)
		}
		g.Disarm()
	}
}

// A sub-cgroup left by a leaderrun that died before its guard knew it is
// removed by the next run's NewCgroup, once its PID no longer runs.
func TestCgroupStaleRemoved(t *testing.T) {
	t.Parallel()
	cg, err := runner.NewCgroup()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup containment in CI: %v", err)
		}
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	parent := filepath.Dir(cg.Path())
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, fmt.Sprintf("leaderrun-%d-0", dead.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(stale) })
	cg, err = runner.NewCgroup()
	if err != nil {
		t.Fatal(err)
	}
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale cgroup %s still there (%v)", stale, err)
	}
}

// TestGuardOfAnotherBuildRefuses: a guard program that speaks another
// protocol exits at once with a message instead of misreading messages, so
// leaderrun sees its guard die (and fails safe).
func TestGuardOfAnotherBuildRefuses(t *testing.T) {
	var stderr strings.Builder
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{runner.GuardArg0, "protocol-0"}, Stderr: &stderr}
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "from one build") {
		t.Fatalf("guard with another protocol: %v, stderr %q; want exit 2 and a message", err, stderr.String())
	}
}

// A guard that has not even started running its own code when leaderrun
// dies still kills the tree (what lets a child start before the guard's
// handshake, Guard.SameBuild): here the guard program is held in a shell
// reading a FIFO until leaderrun's end of the socket has closed; it then
// execs this test binary as the guard, which reads the child's group queued
// in its socket, then the socket's end, and kills the tree.
func TestGuardNotYetReadyStillKills(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	if err := unix.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(dir, "held-guard")
	script := fmt.Sprintf("#!/bin/bash\nread -r _ < %q\nexec -a %q %q \"$@\"\n", gate, runner.GuardArg0, self)
	if err := os.WriteFile(held, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := runner.StartGuardProgram(held)
	if err != nil {
		t.Fatal(err)
	}
	c := startRun(t, runner.Config{Args: []string{"sh", "-c", treeScript}, Guard: g, Grace: time.Hour})
	kids := []int{c.expectPID("kid "), c.expectPID("kid "), c.expectPID("ready ")}
	<-g.Armed()
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Ready(expired); !errors.Is(err, runner.ErrGuardHandshake) {
		t.Fatalf("Ready = %v; want the guard not ready yet (held at the gate)", err)
	}
	g.CloseOwnerEnd()                           // leaderrun dies
	w, err := os.OpenFile(gate, os.O_WRONLY, 0) // the guard goes on to start
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w, "go")
	w.Close()
	for _, fd := range kids {
		if !exited(t, fd, 10*time.Second) {
			t.Fatal("a process of the tree outlived leaderrun with a guard that was not ready yet")
		}
	}
	g.WaitExit()
	if res, err := c.result(); err != nil || res.Signal != syscall.SIGKILL {
		t.Fatalf("Run = %+v, %v; want the child SIGKILLed by the guard", res, err)
	}
}
