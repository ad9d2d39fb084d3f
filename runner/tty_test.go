package runner_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair with /dev/ptmx.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr != nil {
			return
		}
		n, ierr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
	}); err != nil || ierr != nil {
		t.Fatalf("unlock pty: %v %v", err, ierr)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestTerminal runs a mini leaderrun as the session leader of a new pty, the
// way a login shell's foreground job would run, and checks that the child can
// read the terminal, that Ctrl-C reaches it, and that the mini leaderrun gets
// the foreground back.
func TestTerminal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mode  string
		input string
		want  []string
		code  int
	}{
		{"child reads the terminal", "ttyread", "hello\n", []string{"got hello", "mini: foreground restored", "mini: code 0 gone true"}, 0},
		{"Ctrl-C reaches the child", "sleep", "\x03", []string{"mini: foreground restored", "mini: code 130 gone true"}, 130},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			master, slave := openPTY(t)
			exe, env := helperArgs(t, "mini")
			mini := exec.Command(exe[0], tt.mode)
			mini.Env = env
			mini.Stdin, mini.Stdout, mini.Stderr = slave, slave, slave
			mini.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
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
