package runner_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/runner"
	"golang.org/x/sys/unix"
)

// TestForwardedStopSignal: a forwarded INT, TERM or stop signal that the
// child does not obey within the grace is followed by SIGKILL to the group; a
// second one SIGKILLs at once; HUP and the others are only forwarded.
func TestForwardedStopSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mode   string
		stop   syscall.Signal
		grace  time.Duration
		send   []syscall.Signal
		code   int
		killed bool
	}{
		{"TERM obeyed", "sleep", 0, time.Hour, []syscall.Signal{syscall.SIGTERM}, 128 + 15, false},
		{"TERM caught, killed after the grace", "sigrec", 0, 200 * time.Millisecond, []syscall.Signal{syscall.SIGTERM}, 128 + 9, true},
		{"INT caught, killed after the grace", "sigrec", 0, 200 * time.Millisecond, []syscall.Signal{syscall.SIGINT}, 128 + 9, true},
		{"stop signal USR1 caught, killed after the grace", "sigrec", syscall.SIGUSR1, 200 * time.Millisecond, []syscall.Signal{syscall.SIGUSR1}, 128 + 9, true},
		{"second TERM kills at once", "sigrec", 0, time.Hour, []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}, 128 + 9, true},
		{"TERM then INT kills at once", "sigrec", 0, time.Hour, []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}, 128 + 9, true},
		// With no grace at all, an escalation would kill the recorder
		// before it could print the signal or exit 0 at EOF.
		{"HUP is only forwarded", "sigrec", 0, 0, []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args, env := helperArgs(t, tt.mode)
			sigs := make(chan os.Signal, 1)
			c := startRun(t, runner.Config{Args: args, Env: env, Signals: sigs, StopSignal: tt.stop, Grace: tt.grace})
			fd := c.expectPID("ready ")
			// A signal that kills at once (the second) is forwarded and
			// followed by SIGKILL straight away: whether the recorder
			// prints it first is a race, so only the first is awaited.
			atOnce := tt.killed && tt.grace == time.Hour
			for i, s := range tt.send {
				sigs <- s
				if tt.mode == "sigrec" && !(atOnce && i == len(tt.send)-1) {
					c.expect("signal " + unix.SignalName(s))
				}
			}
			if !tt.killed {
				c.stdin.Close() // the recorder exits 0
			}
			// With an hour's grace, Run returns within result's bound only
			// if the second signal killed at once.
			res, err := c.result()
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != tt.code || res.Killed != tt.killed || res.Stopped || !res.GroupGone {
				t.Errorf("result %+v, want code %d, killed %v, not stopped, group gone", res, tt.code, tt.killed)
			}
			if !exited(t, fd, 0) {
				t.Error("child still running after Run returned")
			}
		})
	}
}

// logEvents is a slog.Handler that sends each message to a channel, so
// tests can await the runner's events.
type logEvents chan string

func (l logEvents) Enabled(context.Context, slog.Level) bool { return true }
func (l logEvents) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logEvents) WithGroup(string) slog.Handler            { return l }
func (l logEvents) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Message:
	default: // never block the runner; tests await early events only
	}
	return nil
}

// await waits for a log message with the given prefix.
func (l logEvents) await(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-l:
			if strings.HasPrefix(m, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("timed out waiting for log %q", prefix)
		}
	}
}

// TestStoppedGroupGetsSIGCONT: a child stopped (here by SIGSTOP, which
// leaderrun does not follow without a terminal) acts on a forwarded TERM or
// on the stop sequence, because SIGCONT follows them. Without it, its TERM
// trap would never run and Run would never return.
func TestStoppedGroupGetsSIGCONT(t *testing.T) {
	t.Parallel()
	const script = `trap 'echo trapped; exit 3' TERM; echo ready; kill -STOP $$; echo continued; exit 9`
	tests := []struct {
		name    string
		cancel  bool
		signal  os.Signal
		stopped bool
	}{
		{"forwarded TERM", false, syscall.SIGTERM, false},
		{"forwarded HUP", false, syscall.SIGHUP, false},
		{"stop sequence", true, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events := make(logEvents, 100)
			sigs := make(chan os.Signal, 1)
			script := script
			if tt.signal == syscall.SIGHUP {
				script = strings.ReplaceAll(script, "TERM", "HUP")
			}
			c := startRun(t, runner.Config{Args: []string{"sh", "-c", script}, Signals: sigs,
				Grace: time.Hour, Log: slog.New(events)})
			c.expect("ready")
			events.await(t, "child stopped")
			if tt.cancel {
				c.cancel(errors.New("lease lost"))
			} else {
				sigs <- tt.signal
			}
			c.expect("trapped")
			res, err := c.result()
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != 3 || res.Killed || res.Stopped != tt.stopped || !res.GroupGone {
				t.Errorf("result %+v, want code 3, stopped %v, not killed, group gone", res, tt.stopped)
			}
		})
	}
}

// TestOrphanedStop runs a mini leaderrun in a session of its own and no
// terminal, as an orphaned leaderrun is once its terminal has closed: it
// cannot stop itself (no shell could continue it). A child stopped by SIGTTIN
// stays stopped but a TERM to leaderrun still ends it; a child stopped by
// SIGTSTP (Ctrl-Z) is continued, as the kernel ignores Ctrl-Z for such a job.
func TestOrphanedStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sig    string
		term   bool
		output string
		code   int
	}{
		{"SIGTTIN, then TERM", "TTIN", true, "", 128 + 15},
		{"SIGTSTP ignored", "TSTP", false, "continued", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exe, env := helperArgs(t, "mini")
			mini := exec.Command(exe[0], "sh", "echo ready; kill -"+tt.sig+" $$; echo continued")
			mini.Env = append(env, "MINI_DEBUG=1")
			mini.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			out, err := mini.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			errOut, err := mini.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := mini.Start(); err != nil {
				t.Fatal(err)
			}
			events := make(chan string, 100)
			readerDone := make(chan struct{})
			go func() {
				defer close(readerDone)
				sc := bufio.NewScanner(errOut)
				for sc.Scan() {
					select {
					case events <- sc.Text():
					default:
					}
				}
			}()
			// Wait closes the pipes, so it waits until both are read to the
			// end: stderr by the reader above, stdout by the test below.
			stdoutRead := make(chan struct{})
			var readOnce sync.Once
			doneReading := func() { readOnce.Do(func() { close(stdoutRead) }) }
			waited := make(chan error, 1)
			go func() {
				<-readerDone
				<-stdoutRead
				waited <- mini.Wait()
			}()
			t.Cleanup(func() {
				mini.Process.Kill()
				doneReading()
				<-waited
			})
			stdout := bufio.NewReader(out)
			if l, err := stdout.ReadString('\n'); l != "ready\n" {
				t.Fatalf("read %q, %v; want ready", l, err)
			}
			await := func(want string) {
				t.Helper()
				timeout := time.After(10 * time.Second)
				for {
					select {
					case l := <-events:
						if strings.Contains(l, want) {
							return
						}
					case <-timeout:
						t.Fatalf("timed out waiting for %q on the mini leaderrun's stderr", want)
					}
				}
			}
			await(`msg="child stopped" pid=`)
			await(`msg="cannot stop with the child" pid=`)
			if tt.term {
				if err := mini.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			rest, _ := stdout.ReadString(0) // EOF once the group is gone
			doneReading()
			var child []string
			for _, l := range strings.Split(strings.TrimSpace(rest), "\n") {
				if !strings.HasPrefix(l, "mini: ") {
					child = append(child, l)
				}
			}
			if got := strings.Join(child, "\n"); got != tt.output {
				t.Errorf("child wrote %q after it stopped, want %q", got, tt.output)
			}
			select {
			case err := <-waited:
				waited <- err
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if code != tt.code {
					t.Errorf("mini leaderrun exited %d, want %d", code, tt.code)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("mini leaderrun did not exit")
			}
		})
	}
}
