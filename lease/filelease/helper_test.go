package filelease

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The cross-user tests run this test binary again as another uid (with
// SysProcAttr.Credential), in helper mode: FILELEASE_HELPER names one
// operation on the store in FILELEASE_DIR, and the child prints its outcome
// as one line on stdout.

// helperBin is a copy of the test binary that every uid may execute.
var helperBin string

func TestMain(m *testing.M) {
	if op := os.Getenv("FILELEASE_HELPER"); op != "" {
		os.Exit(helper(op, os.Getenv("FILELEASE_DIR"), os.Getenv("FILELEASE_NAME")))
	}
	code := m.Run()
	if helperBin != "" {
		os.RemoveAll(filepath.Dir(helperBin))
	}
	os.Exit(code)
}

// class names an error's classification for the helper's report.
func class(err error) string {
	var he *lease.HeldError
	switch {
	case errors.As(err, &he):
		return "held"
	case errors.Is(err, lease.ErrConfig):
		return "config"
	case errors.Is(err, lease.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, lease.ErrLost):
		return "lost"
	}
	return "other"
}

func helper(op, dir, name string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	report := func(err error) int {
		fmt.Printf("err %s %s\n", class(err), err)
		return 0
	}
	if op == "defaultdir" {
		d, err := DefaultDir()
		if err != nil {
			return report(err)
		}
		fmt.Println("ok", d)
		return 0
	}
	// The helpers play the users of shared directories, 1777 ones
	// included: those take the opt-in (TestWorldWritableRefused tests the
	// refusal).
	s, err := OpenWith(dir, Options{World: true})
	if err != nil {
		return report(err)
	}
	defer s.Close()
	switch op {
	case "acquire", "hold":
		l, err := s.TryAcquire(ctx, lease.Request{Name: name, Label: fmt.Sprintf("uid%d", os.Getuid()), ID: lease.NewID()})
		if err != nil {
			return report(err)
		}
		fmt.Println("ok", l.Info().Token)
		if op == "hold" {
			_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
		}
		if err := l.Release(ctx); err != nil {
			fmt.Println("release failed:", err)
			return 1
		}
	case "status":
		h, err := s.Status(ctx, name)
		if err != nil {
			return report(err)
		}
		if h == nil {
			fmt.Println("free")
		} else {
			fmt.Println("held", h.Label, h.Token)
		}
	case "record": // a successful run of name, token FILELEASE_ARG
		tok, _ := strconv.ParseUint(os.Getenv("FILELEASE_ARG"), 10, 64)
		now := time.Now().UTC()
		run := lease.Run{Name: name, Label: fmt.Sprintf("uid%d", os.Getuid()), Token: tok, Start: now, End: now, Outcome: lease.OutcomeOK}
		if err := s.RecordRun(ctx, run, 0); err != nil {
			return report(err)
		}
		fmt.Println("ok")
	case "runs": // the tokens of name's runs this user reads
		runs, err := s.Runs(ctx, name, 0)
		if err != nil {
			return report(err)
		}
		toks := []string{"runs"}
		for _, r := range runs {
			toks = append(toks, strconv.FormatUint(r.Token, 10))
		}
		fmt.Println(strings.Join(toks, " "))
	case "append": // append line FILELEASE_ARG to the file name in dir, creating it 0666
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
		if err != nil {
			return report(err)
		}
		_, err = fmt.Fprintln(f, os.Getenv("FILELEASE_ARG"))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return report(err)
		}
		fmt.Println("ok")
	default:
		fmt.Println("unknown helper op", op)
		return 2
	}
	return 0
}

// user is who a helper runs as.
type runAs struct {
	uid, gid uint32
	groups   []uint32
}

func (u runAs) String() string { return fmt.Sprintf("uid %d", u.uid) }

var root = runAs{}

// requireRoot skips tests that need to switch users.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run helpers as other users (CI runs tests as root)")
	}
}

// helperPath copies the test binary where every uid can execute it.
func helperPath(t *testing.T) string {
	t.Helper()
	if helperBin != "" {
		return helperBin
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "filelease-helper-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "filelease.test")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	helperBin = p
	return p
}

func helperCmd(t *testing.T, u runAs, op, dir, name string, arg ...string) *exec.Cmd {
	t.Helper()
	// A helper that hangs (a FIFO opened without O_NONBLOCK) fails the
	// test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, helperPath(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), "FILELEASE_HELPER="+op, "FILELEASE_DIR="+dir, "FILELEASE_NAME="+name, "FILELEASE_ARG="+strings.Join(arg, " "),
		// Under -race, a process sleeps 1s at exit by default.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Dir = "/"
	if u.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	}
	return cmd
}

// as runs one helper operation as u and returns its report line.
func as(t *testing.T, u runAs, op, dir, name string, arg ...string) string {
	t.Helper()
	cmd := helperCmd(t, u, op, dir, name, arg...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %s as %v: %v: %s", op, u, err, out)
	}
	return strings.TrimSpace(string(out))
}

// holding is a helper that holds a lease until stop.
type holding struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	line  string
}

// holdAs starts a helper holding name as u and returns once it reported.
func holdAs(t *testing.T, u runAs, dir, name string) *holding {
	t.Helper()
	cmd := helperCmd(t, u, "hold", dir, name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holding{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { h.stop(t) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("holder as %v said %q: %v", u, line, err)
	}
	h.line = strings.TrimSpace(line)
	return h
}

func (h *holding) stop(t *testing.T) {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	if err := h.cmd.Wait(); err != nil {
		t.Errorf("holder: %v", err)
	}
}

// token parses an "ok TOKEN" report.
func token(t *testing.T, who, line string) uint64 {
	t.Helper()
	var tok uint64
	if _, err := fmt.Sscanf(line, "ok %d", &tok); err != nil {
		t.Fatalf("%s: %q; want ok TOKEN", who, line)
	}
	return tok
}

// traversable makes t.TempDir's parent and d reachable by every uid and
// returns d.
func traversable(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// mkStore makes a store directory with mode, owner uid and group gid.
func mkStore(t *testing.T, mode os.FileMode, uid, gid int) string {
	t.Helper()
	d := filepath.Join(traversable(t), "store")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}
