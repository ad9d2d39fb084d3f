package runner_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/runner"
	"golang.org/x/sys/unix"
)

// helperEnv selects a helper mode when the test binary is re-run as a child,
// as os/exec's own tests do.
const helperEnv = "LEADERRUN_RUNNER_HELPER"

func TestMain(m *testing.M) {
	if runner.IsGuard(os.Args) {
		os.Exit(runner.GuardMain(os.Args))
	}
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Unsetenv(helperEnv)
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	// Leave the terminal of a developer running go test: Run hands the
	// controlling terminal to the child and stops with it, and the tests
	// that need a terminal make ptys of their own.
	_, _ = unix.Setsid()
	os.Exit(m.Run())
}

// helperMain implements the helper children. Each writes "ready ..." to stdout
// once it is set up, so tests wait for an event instead of sleeping.
func helperMain(mode string, args []string) int {
	switch mode {
	case "exit": // exit with args[0]
		n, _ := strconv.Atoi(args[0])
		return n
	case "sleep": // well-behaved: default TERM action
		fmt.Printf("ready %d\n", os.Getpid())
		time.Sleep(time.Hour)
	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
		fmt.Printf("ready %d\n", os.Getpid())
		time.Sleep(time.Hour)
	case "sigrec": // print each forwarded signal; exit 0 at stdin EOF
		ch := make(chan os.Signal, 16)
		signal.Notify(ch, runner.ForwardedSignals...)
		eof := make(chan struct{})
		go func() {
			bufio.NewReader(os.Stdin).ReadString(0)
			close(eof)
		}()
		fmt.Printf("ready %d\n", os.Getpid())
		for {
			select {
			case s := <-ch:
				fmt.Printf("signal %s\n", unix.SignalName(s.(syscall.Signal)))
			case <-eof:
				return 0
			}
		}
	case "echo": // echo stdin lines; exit 0 at EOF
		fmt.Printf("ready %d\n", os.Getpid())
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Printf("echo %s\n", sc.Text())
		}
		return 0
	case "ttyread": // read one line from the terminal
		fmt.Printf("ready %d\n", os.Getpid())
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			fmt.Printf("read error %v\n", err)
			return 1
		}
		fmt.Printf("got %s", line)
		return 0
	case "sh": // sh -c args[0], with the rest as $0, $1...
		err := syscall.Exec("/bin/sh", append([]string{"sh", "-c"}, args...), os.Environ())
		fmt.Fprintln(os.Stderr, err)
		return 127
	case "mini": // a minimal leaderrun: run args under runner.Run
		// MINI_GRACE sets the grace (default 1s); MINI_DEBUG=1 logs at debug
		// level, so that tests can await the runner's events.
		exe, _ := os.Executable()
		grace := time.Second
		if g := os.Getenv("MINI_GRACE"); g != "" {
			grace, _ = time.ParseDuration(g)
		}
		level := slog.LevelWarn
		if os.Getenv("MINI_DEBUG") == "1" {
			level = slog.LevelDebug
		}
		res, err := runner.Run(context.Background(), runner.Config{
			Args:  append([]string{exe}, args[1:]...),
			Env:   append(os.Environ(), helperEnv+"="+args[0]),
			Grace: grace,
			Log:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 125
		}
		if tty, err := os.Open("/dev/tty"); err == nil {
			fg, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
			if err == nil && fg == unix.Getpgrp() {
				fmt.Println("mini: foreground restored")
			}
			tty.Close()
		}
		fmt.Printf("mini: code %d gone %v\n", res.Code, res.GroupGone)
		return res.Code
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	return 0
}

// child is one helper child started by runner.Run in the background.
type child struct {
	t      *testing.T
	lines  chan string // child's stdout lines; closed at EOF
	stdin  *os.File    // write end of the child's stdin
	cancel context.CancelCauseFunc
	done   chan runResult
}

type runResult struct {
	res runner.Result
	err error
}

func helperArgs(t *testing.T, mode string, args ...string) ([]string, []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Without atexit_sleep_ms=0 a -race helper lingers 1s at exit.
	return append([]string{exe}, args...), append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
}

// startRun runs cfg under runner.Run in a goroutine, wiring the child's stdin
// and stdout to pipes. The test's cleanup waits for Run to return.
func startRun(t *testing.T, cfg runner.Config) *child {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Stdin, cfg.Stdout = inR, outW
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &child{t: t, lines: make(chan string, 100), stdin: inW, cancel: cancel, done: make(chan runResult, 1)}
	go func() {
		res, err := runner.Run(ctx, cfg)
		inR.Close()
		outW.Close() // the reader sees EOF once the group is gone
		c.done <- runResult{res, err}
	}()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel(nil)
		inW.Close()
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			t.Error("runner.Run did not return")
		}
		select {
		case <-readerDone:
		case <-time.After(5 * time.Second):
			t.Error("the child's stdout is still open: a process survived Run")
		}
		outR.Close() // unblocks the reader
		<-readerDone
	})
	return c
}

// expect waits for the next stdout line and checks its prefix; it returns the
// rest of the line.
func (c *child) expect(prefix string) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("child's stdout closed, want %q", prefix)
		}
		if len(l) < len(prefix) || l[:len(prefix)] != prefix {
			c.t.Fatalf("child wrote %q, want prefix %q", l, prefix)
		}
		return l[len(prefix):]
	case <-time.After(10 * time.Second):
		c.t.Fatalf("timed out waiting for %q from the child", prefix)
	}
	return ""
}

// expectPID reads a line "PREFIX<pid>" and returns a pidfd for that process.
func (c *child) expectPID(prefix string) int {
	c.t.Helper()
	pid, err := strconv.Atoi(c.expect(prefix))
	if err != nil {
		c.t.Fatal(err)
	}
	return pidfd(c.t, pid)
}

// result waits for Run to return.
func (c *child) result() (runner.Result, error) {
	c.t.Helper()
	select {
	case r := <-c.done:
		c.done <- r // keep it for the cleanup
		return r.res, r.err
	case <-time.After(20 * time.Second):
		c.t.Fatal("runner.Run did not return")
	}
	return runner.Result{}, nil
}

// pidfd opens a pidfd for pid, which stays valid (and readable once the
// process exits) even if the PID is reused.
func pidfd(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// exited waits up to d for the process behind the pidfd to exit (a zombie
// counts as exited).
func exited(t *testing.T, fd int, d time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd: %v", err)
		}
		return n == 1
	}
}
