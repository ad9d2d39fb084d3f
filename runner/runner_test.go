package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/runner"
	"golang.org/x/sys/unix"
)

func TestExitCodes(t *testing.T) {
	t.Parallel()
	exe, env := helperArgs(t, "exit")
	tests := []struct {
		name string
		args []string
		env  []string
		code int
		sig  syscall.Signal
	}{
		{"exit 0", append(exe, "0"), env, 0, 0},
		{"exit 3", append(exe, "3"), env, 3, 0},
		{"exit 255", append(exe, "255"), env, 255, 0},
		{"SIGUSR1", []string{"sh", "-c", "kill -USR1 $$"}, nil, 128 + 10, syscall.SIGUSR1},
		{"SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, nil, 137, syscall.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := startRun(t, runner.Config{Args: tt.args, Env: tt.env})
			res, err := c.result()
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != tt.code || res.Signal != tt.sig {
				t.Errorf("code %d signal %v, want %d %v", res.Code, res.Signal, tt.code, tt.sig)
			}
			if res.Stopped || res.Killed || !res.GroupGone || res.PID == 0 {
				t.Errorf("result %+v, want not stopped, not killed, group gone, a PID", res)
			}
		})
	}
}

// TestForwardSignals: every forwarded signal reaches the group. INT and TERM
// are sent last: they start the grace (TestForwardedStopSignal), which is long
// here, and the recorder survives them and exits 0 by itself.
func TestForwardSignals(t *testing.T) {
	t.Parallel()
	args, env := helperArgs(t, "sigrec")
	sigs := make(chan os.Signal, 1)
	c := startRun(t, runner.Config{Args: args, Env: env, Signals: sigs, Grace: time.Hour})
	c.expect("ready ")
	sigs <- syscall.SIGCHLD // never forwarded: the recorder would print it
	var last []os.Signal
	for _, s := range runner.ForwardedSignals {
		if s == syscall.SIGINT || s == syscall.SIGTERM {
			last = append(last, s)
			continue
		}
		sigs <- s
		c.expect("signal " + unix.SignalName(s.(syscall.Signal)))
	}
	sigs <- last[0] // a second one would SIGKILL at once
	c.expect("signal " + unix.SignalName(last[0].(syscall.Signal)))
	c.stdin.Close()
	res, err := c.result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 || res.Stopped || res.Killed || !res.GroupGone {
		t.Errorf("result %+v, want code 0, group gone", res)
	}
}

// TestForwardOwnNotify: with Config.Signals nil, Run catches the signals
// itself. Not parallel: it signals the test process.
func TestForwardOwnNotify(t *testing.T) {
	args, env := helperArgs(t, "sigrec")
	c := startRun(t, runner.Config{Args: args, Env: env})
	c.expect("ready ")
	for _, s := range []syscall.Signal{syscall.SIGUSR2, syscall.SIGWINCH} {
		if err := unix.Kill(os.Getpid(), s); err != nil {
			t.Fatal(err)
		}
		c.expect("signal " + unix.SignalName(s))
	}
	c.stdin.Close()
	if res, err := c.result(); err != nil || res.Code != 0 {
		t.Fatalf("result %+v, %v", res, err)
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	// A child that dies of TERM gets a grace no load can exhaust: what is
	// checked is that TERM, not KILL, ended it (under load, a child took
	// longer than a 200 ms grace to die and was rightly SIGKILLed). One
	// that ignores TERM is killed at the end of a short one.
	tests := []struct {
		mode   string
		grace  time.Duration
		code   int
		killed bool
	}{
		{"sleep", time.Minute, 128 + 15, false},
		{"ignoreterm", 200 * time.Millisecond, 128 + 9, true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			args, env := helperArgs(t, tt.mode)
			c := startRun(t, runner.Config{Args: args, Env: env, Grace: tt.grace})
			fd := c.expectPID("ready ")
			c.cancel(errors.New("lease lost"))
			res, err := c.result()
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != tt.code || !res.Stopped || res.Killed != tt.killed || !res.GroupGone {
				t.Errorf("result %+v, want code %d, stopped, killed %v, group gone", res, tt.code, tt.killed)
			}
			if !exited(t, fd, 0) {
				t.Error("child still running after Run returned")
			}
		})
	}
}

func TestStopSignal(t *testing.T) {
	t.Parallel()
	args, env := helperArgs(t, "sigrec")
	c := startRun(t, runner.Config{Args: args, Env: env, StopSignal: syscall.SIGUSR1, Grace: 10 * time.Second})
	c.expect("ready ")
	c.cancel(nil)
	c.expect("signal SIGUSR1")
	c.stdin.Close() // the recorder now exits 0 by itself, well within the grace
	res, err := c.result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 || !res.Stopped || res.Killed || !res.GroupGone {
		t.Errorf("result %+v, want code 0, stopped, not killed, group gone", res)
	}
}

// TestGrandchildren: nothing the child started survives Run, whether the
// group is stopped by cancellation or left behind by a child that exits.
func TestGrandchildren(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		script  string
		cancel  bool
		code    int
		stopped bool
		killed  bool
	}{
		{"cancel", "sleep 300 & echo $!; sleep 300 & echo $!; echo ready; wait", true, 143, true, false},
		{"cancel, TERM ignored", "trap '' TERM; sleep 300 & echo $!; sleep 300 & echo $!; echo ready; wait", true, 137, true, true},
		{"leftovers swept", "sleep 300 & echo $!; sleep 300 & echo $!; echo ready; exit 7", false, 7, false, false},
		{"leftovers ignore TERM", "trap '' TERM; sleep 300 & echo $!; sleep 300 & echo $!; echo ready", false, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := startRun(t, runner.Config{Args: []string{"sh", "-c", tt.script}, Grace: 200 * time.Millisecond})
			fds := []int{c.expectPID(""), c.expectPID("")}
			c.expect("ready")
			if tt.cancel {
				c.cancel(nil)
			}
			res, err := c.result()
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != tt.code || res.Stopped != tt.stopped || res.Killed != tt.killed || !res.GroupGone {
				t.Errorf("result %+v, want code %d, stopped %v, killed %v, group gone", res, tt.code, tt.stopped, tt.killed)
			}
			for i, fd := range fds {
				if !exited(t, fd, 0) {
					t.Errorf("grandchild %d still running after Run returned", i)
				}
			}
		})
	}
}

// TestParentKilled: a SIGKILLed leaderrun takes its child with it (Pdeathsig).
func TestParentKilled(t *testing.T) {
	t.Parallel()
	exe, env := helperArgs(t, "mini")
	mini := exec.Command(exe[0], "sleep")
	mini.Env = env
	out, err := mini.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := mini.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := out.Read(buf) // "ready PID\n" from the grandchild
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(string(buf[:n]), "ready %d", &pid); err != nil {
		t.Fatalf("read %q: %v", buf[:n], err)
	}
	fd := pidfd(t, pid)
	if err := mini.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	mini.Wait()
	if !exited(t, fd, time.Second) {
		unix.Kill(pid, syscall.SIGKILL)
		t.Fatal("child still running 1s after its leaderrun was SIGKILLed")
	}
}

// TestPdeathsigThreadChurn is the golang/go#27505 regression test: OS threads
// that die (goroutines locked to them exit) must not take the child along.
// Checked by hand: with Run's LockOSThread removed and the starting goroutine
// parked between Start and Wait, this test fails every time.
func TestPdeathsigThreadChurn(t *testing.T) {
	t.Parallel()
	args, env := helperArgs(t, "echo")
	c := startRun(t, runner.Config{Args: args, Env: env})
	c.expect("ready ")
	for range 20 {
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				runtime.LockOSThread() // exit locked: the runtime kills this thread
				time.Sleep(time.Millisecond)
			})
		}
		wg.Wait()
	}
	if _, err := c.stdin.WriteString("ping\n"); err != nil {
		t.Fatal(err)
	}
	c.expect("echo ping")
	c.stdin.Close()
	res, err := c.result()
	if err != nil || res.Code != 0 || res.Signal != 0 {
		t.Fatalf("result %+v, %v; want a clean exit 0", res, err)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cmd  string
		want error
	}{
		{"absent path", filepath.Join(dir, "absent"), runner.ErrNotFound},
		{"absent in PATH", "leaderrun-no-such-command", runner.ErrNotFound},
		{"under a file", filepath.Join(noexec, "x"), runner.ErrNotFound},
		{"no x bit", noexec, runner.ErrNotExecutable},
		{"directory", dir, runner.ErrNotExecutable},
		{"no x bit in PATH", "noexec", runner.ErrNotExecutable},
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := runner.Resolve(tt.cmd); !errors.Is(err, tt.want) {
				t.Errorf("Resolve: %v, want %v", err, tt.want)
			}
			res, err := runner.Run(context.Background(), runner.Config{Args: []string{tt.cmd}})
			if !errors.Is(err, tt.want) {
				t.Errorf("Run: %v, want %v", err, tt.want)
			}
			if res.PID != 0 {
				t.Errorf("Run started process %d", res.PID)
			}
		})
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	lost := errors.New("lease lost")
	cancel(lost)
	res, err := runner.Run(ctx, runner.Config{Args: []string{"true"}})
	if !errors.Is(err, lost) || res.PID != 0 {
		t.Fatalf("Run: %+v, %v; want nothing started and the cause", res, err)
	}
}

// KillNow (the lease's kill point) SIGKILLs the group at once, however long
// the grace: the grace timer runs on a clock that stops in suspend, the kill
// point does not.
func TestKillNowOverridesGrace(t *testing.T) {
	t.Parallel()
	args, env := helperArgs(t, "ignoreterm")
	killNow := make(chan struct{})
	c := startRun(t, runner.Config{Args: args, Env: env, Grace: time.Hour, KillNow: killNow})
	fd := c.expectPID("ready ")
	c.cancel(errors.New("lease lost"))
	close(killNow)
	res, err := c.result()
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 128+9 || !res.Stopped || !res.Killed || !res.GroupGone {
		t.Fatalf("result %+v; want SIGKILLed (137), stopped, killed, group gone", res)
	}
	if !exited(t, fd, 0) {
		t.Fatal("child still running after Run returned")
	}
}
