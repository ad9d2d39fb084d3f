package runner_test

import (
	"bufio"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/ptytest"
)

// TestTerminal runs a mini leaderrun as the session leader of a new pty, the
// way a login shell's foreground job would run, and checks that the child can
// read the terminal, that Ctrl-C reaches it, and that the mini leaderrun gets
// the foreground back.
func TestTerminal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		pipe  bool // stdin is a pipe, not the terminal
		input string
		want  []string
		code  int
	}{
		{"child reads the terminal", []string{"ttyread"}, false, "hello\n", []string{"got hello", "mini: foreground restored", "mini: code 0 gone true"}, 0},
		{"Ctrl-C reaches the child", []string{"sleep"}, false, "\x03", []string{"mini: foreground restored", "mini: code 130 gone true"}, 130},
		// cat f | leaderrun -- less: the terminal follows the controlling
		// terminal, not stdin.
		{"stdin a pipe, child reads /dev/tty", []string{"sh", `echo ready $$; IFS= read -r l </dev/tty; echo "got $l"`}, true,
			"hello\n", []string{"got hello", "mini: foreground restored", "mini: code 0 gone true"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			master, slave := ptytest.Open(t)
			exe, env := helperArgs(t, "mini")
			mini := exec.Command(exe[0], tt.args...)
			mini.Env = env
			mini.Stdin, mini.Stdout, mini.Stderr = slave, slave, slave
			if tt.pipe {
				mini.Stdin = strings.NewReader("")
			}
			mini.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 1}
			if err := mini.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			waited := make(chan error, 1)
			go func() { waited <- mini.Wait() }()
			t.Cleanup(func() {
				mini.Process.Kill()
				<-waited
			})

			lines := make(chan string, 100)
			go func() { // ends when the pty's last slave descriptor closes (EIO)
				defer close(lines)
				sc := bufio.NewScanner(master)
				for sc.Scan() {
					// Drop the echo of Ctrl-C, which has no newline of its own.
					lines <- strings.TrimPrefix(strings.TrimRight(sc.Text(), "\r"), "^C")
				}
			}()
			next := func() string {
				t.Helper()
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatal("terminal closed early")
					}
					return l
				case <-time.After(10 * time.Second):
					t.Fatal("timed out reading the terminal")
				}
				return ""
			}
			if l := next(); !strings.HasPrefix(l, "ready ") {
				t.Fatalf("got %q, want ready", l)
			}
			if _, err := master.WriteString(tt.input); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.want {
				for {
					l := next()
					if l == want {
						break
					}
					// Run logs a failed foreground or termios restore at warn level.
					if strings.HasPrefix(l, "mini:") || strings.HasPrefix(l, "got ") ||
						strings.Contains(l, "error") || strings.Contains(l, "level=WARN") {
						t.Fatalf("got %q, want %q", l, want)
					}
					t.Logf("terminal: %q", l) // echo of the input, log lines
				}
			}
			select {
			case err := <-waited:
				waited <- err
				var ee *exec.ExitError
				code := 0
				if err != nil {
					if !errors.As(err, &ee) {
						t.Fatal(err)
					}
					code = ee.ExitCode()
				}
				if code != tt.code {
					t.Errorf("mini leaderrun exited %d, want %d", code, tt.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("mini leaderrun did not exit")
			}
		})
	}
}

// TestTerminalLeftToAnotherGroup: when the child's group no longer has the
// foreground at its end (here a job of the child's has it, as a shell has
// once it took the terminal back), the mini leaderrun leaves the terminal
// where it is: taking it from a live group would take it from a shell, whose
// next read then fails.
func TestTerminalLeftToAnotherGroup(t *testing.T) {
	t.Parallel()
	master, slave := ptytest.Open(t)
	exe, env := helperArgs(t, "mini")
	// The child runs job control: its job gets a group of its own in the
	// terminal's session and, brought to the foreground, reads a line.
	mini := exec.Command(exe[0], "sh",
		`set -m; sh -c 'read y; echo "other $$ $y"; exec sleep 600' & echo "ready $$"; fg >/dev/null`)
	mini.Env = env
	mini.Stdin, mini.Stdout, mini.Stderr = slave, slave, slave
	mini.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := mini.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	waited := make(chan error, 1)
	go func() { waited <- mini.Wait() }()
	var other int
	t.Cleanup(func() {
		mini.Process.Kill()
		<-waited
		if other > 0 {
			syscall.Kill(-other, syscall.SIGKILL)
		}
	})
	fg := func() int {
		t.Helper()
		rc, err := master.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var pg int
		rc.Control(func(fd uintptr) { pg, err = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) })
		if err != nil {
			t.Fatalf("TIOCGPGRP: %v", err)
		}
		return pg
	}
	term := ptytest.NewTerm(t, master)
	term.Expect("ready ", 10*time.Second)
	child, err := strconv.Atoi(term.Expect("\r\n", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	term.Send("go\n") // read by the job once the child's fg gave it the terminal
	term.Expect("other ", 10*time.Second)
	if other, err = strconv.Atoi(term.Expect(" go\r\n", 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := fg(); got != other {
		t.Fatalf("foreground group %d, want the job's %d", got, other)
	}
	if err := syscall.Kill(child, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	term.Expect("mini: code 143", 10*time.Second)
	select {
	case <-waited:
		waited <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("mini leaderrun did not exit")
	}
	// The mini leaderrun prints this if it has the foreground after Run
	// (once it has exited, its session has no terminal to look at).
	if strings.Contains(term.Output(), "foreground restored") {
		t.Error("the mini leaderrun took the terminal from a live group")
	}
}
