package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// lrBin is the leaderrun binary built once by TestMain: the black-box tests
// run exactly what users run.
var lrBin string

func TestMain(m *testing.M) {
	leasetest.DeathWatcherMain()
	// The tests run from the repository root, as users and scripts/test.sh
	// do: README.md, scripts/ and `go run .` are where the README says.
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "leaderrun-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Readable by every user: some tests run it as another uid.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lrBin = filepath.Join(dir, "leaderrun")
	// leaderrun and the store programs it hands other stores to
	// (cmd/leaderrun-*), side by side as `go install .../...` puts them,
	// built as scripts/release.sh and README's install line build them
	// (static, and without urfave/cli's man-page renderer:
	// docs/performance.md). -trimpath as they do: the compiled packages
	// are then the install line's own (its build in a copy of the tree
	// links from the cache rather than compiling everything again, which
	// took over 3 minutes on a loaded 2-core machine).
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-tags", "urfave_cli_no_docs", "-o", dir+"/", ".", "./cmd/...")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building leaderrun:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireEnv returns an integration server address; see leasetest.RequireEnv.
func requireEnv(t testing.TB, name string) string { return leasetest.RequireEnv(t, name) }

// together runs each of subs as a subtest of t, all at once, in the one
// parallel slot t holds: for tests that mostly wait (for a period, a
// TTL), which would otherwise each hold one of the package's -parallel
// slots while tests that need a core wait for it. (A subtest that called
// t.Parallel would take a slot of its own.)
func together(t *testing.T, subs map[string]func(*testing.T)) {
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(subs)) {
		wg.Go(func() { t.Run(name, subs[name]) })
	}
	wg.Wait()
}

// lr is one leaderrun process under test.
type lr struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr lockedBuffer
	stdout *bufio.Reader
	done   chan struct{}
	err    error
}

// lockedBuffer is a bytes.Buffer safe to read while exec writes into it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fileStore returns a --store URL for a fresh file store directory.
func fileStore(t *testing.T) string { return "file://" + t.TempDir() }

// start starts leaderrun with args; env adds to the environment. The
// child's stdout is readable line by line with line().
func start(t *testing.T, env []string, args ...string) *lr {
	t.Helper()
	p, _ := launch(t, env, false, args...)
	return p
}

// startStdin is start with a pipe on leaderrun's (and so the child's) stdin.
func startStdin(t *testing.T, env []string, args ...string) (*lr, io.WriteCloser) {
	t.Helper()
	return launch(t, env, true, args...)
}

func launch(t *testing.T, env []string, withStdin bool, args ...string) (*lr, io.WriteCloser) {
	t.Helper()
	p := newLR(t, exec.Command(lrBin, args...))
	p.cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	return p, p.begin(withStdin)
}

// newLR wraps cmd, not yet started, as an lr whose stderr is collected;
// the caller sets its environment, directory or credentials, then begin.
func newLR(t *testing.T, cmd *exec.Cmd) *lr {
	p := &lr{t: t, cmd: cmd, done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	return p
}

// begin starts p with its stdout readable line by line (and a pipe on its
// stdin if withStdin); the test's cleanup kills it (its whole process group
// if it has one of its own) unless it has exited.
func (p *lr) begin(withStdin bool) io.WriteCloser {
	t := p.t
	t.Helper()
	var in io.WriteCloser
	if withStdin {
		var err error
		if in, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	// An os.Pipe, not StdoutPipe: Wait would close StdoutPipe's read end
	// when the process exits, losing what the test has not read yet. This
	// read end stays open until the test ends, so the output can be read to
	// EOF after the exit.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = w
	p.stdout = bufio.NewReader(out)
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		out.Close()
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { out.Close() })
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			if a := p.cmd.SysProcAttr; a != nil && a.Setpgid {
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			} else {
				_ = p.cmd.Process.Kill()
			}
			<-p.done
		}
	})
	return in
}

// runCrowd starts n instances at once on one lease name, each running a
// child that marks its start and end around work, and checks that all exit
// 0 without crashing, none overlapped, and tokens strictly increased.
func runCrowd(t *testing.T, env []string, name string, n int, work string) {
	t.Helper()
	marks := filepath.Join(t.TempDir(), "marks")
	ps := make([]*lr, n)
	for i := range ps {
		ps[i] = start(t, env, append([]string{"--name", name, "--"}, markChild(marks, work)...)...)
	}
	for i, p := range ps {
		if c := p.wait(); c != 0 {
			t.Fatalf("instance %d exited %d: %s", i, c, p.stderr.String())
		}
		if s := p.stderr.String(); strings.Contains(s, "panic") || strings.Contains(s, "goroutine ") {
			t.Fatalf("instance %d crashed: %s", i, s)
		}
	}
	if runs := checkMarks(t, marks); runs != n {
		t.Fatalf("%d runs; want %d", runs, n)
	}
}

// line reads one line the child printed on stdout.
func (p *lr) line() string {
	p.t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() { s, err := p.stdout.ReadString('\n'); ch <- res{s, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			p.t.Fatalf("reading the child's stdout: %v (stderr: %s)", r.err, p.stderr.String())
		}
		return strings.TrimSpace(r.s)
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no line from the child in 30s (stderr: %s)", p.stderr.String())
		return ""
	}
}

// wait waits for leaderrun to exit and returns its exit code.
func (p *lr) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("leaderrun did not exit in 60s (stderr: %s)", p.stderr.String())
	}
	_, _ = io.Copy(io.Discard, p.stdout)
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatalf("leaderrun: %v", p.err)
	return -1
}

// stderrLines returns what leaderrun wrote on stderr, line by line.
func (p *lr) stderrLines() []string {
	return strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
}

// lastLine is leaderrun's final stderr line.
func (p *lr) lastLine() string {
	l := p.stderrLines()
	return l[len(l)-1]
}

// runLR runs leaderrun to completion and returns its exit code and stderr.
func runLR(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	p := start(t, env, args...)
	code := p.wait()
	return code, p.stderr.String()
}

// alive reports whether pid exists (and is not a zombie we could still see).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// state is the field after the ")" of the command name
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone waits until pid no longer runs and returns when it noticed
// (polling /proc: pid may be gone already; a test that needs the moment of
// death uses leasetest.WatchDeath).
func waitGone(t *testing.T, pid int, within time.Duration) time.Time {
	t.Helper()
	for deadline := time.Now().Add(within); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %v", pid, within)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now()
}

// awaitDeath returns the death (leasetest.WatchDeath) of child, which must
// come soon after its leaderrun exited.
func awaitDeath(t *testing.T, child int, died <-chan leasetest.Death) leasetest.Death {
	t.Helper()
	select {
	case d := <-died:
		return d
	case <-time.After(5 * time.Second):
		t.Fatalf("child %d still alive 5s after its leaderrun exited", child)
		return leasetest.Death{}
	}
}

// waitStderr waits until leaderrun's stderr contains s.
func waitStderr(t *testing.T, p *lr, s string, within time.Duration) {
	t.Helper()
	waitStderrAny(t, p, []string{s}, within)
}

// waitStderrAny waits until leaderrun's stderr contains one of ss.
func waitStderrAny(t *testing.T, p *lr, ss []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, s := range ss {
			if strings.Contains(p.stderr.String(), s) {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("leaderrun exited before saying any of %q: %s", ss, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaderrun said none of %q in %v: %s", ss, within, p.stderr.String())
		}
		time.Sleep(2 * time.Millisecond) // polling stderr: there is no event for it
	}
}

// renewalsSent returns the send times of the renewals leaderrun confirmed
// (the "sent" of each "renewed" event; needs -v --log-format json).
func renewalsSent(t *testing.T, p *lr) []time.Time {
	t.Helper()
	var sent []time.Time
	for _, l := range p.stderrLines() {
		var m struct{ Event, Sent string }
		if json.Unmarshal([]byte(l), &m) != nil || m.Event != "renewed" {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m.Sent)
		if err != nil {
			t.Fatalf("renewed event with a bad sent time: %q", l)
		}
		sent = append(sent, ts)
	}
	return sent
}

// lastJSON decodes leaderrun's final stderr line (--log-format json).
func lastJSON(t *testing.T, p *lr) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(p.lastLine()), &m); err != nil {
		t.Fatalf("final stderr line %q is not JSON: %v", p.lastLine(), err)
	}
	return m
}

// markChild is a shell child that appends "start PID TOKEN" and "end PID" to
// marks around a short piece of work, so overlaps can be found afterwards.
func markChild(marks string, work string) []string {
	return []string{"sh", "-c", fmt.Sprintf(`echo "start $$ $LEADERRUN_TOKEN" >> %s; %s; echo "end $$" >> %s`, marks, work, marks)}
}

// checkMarks verifies that no two children overlapped (every start is
// followed by its own end before the next start) and that tokens strictly
// increase; it returns the number of runs.
func checkMarks(t *testing.T, marks string) int {
	t.Helper()
	b, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	runs, open := 0, ""
	var lastToken uint64
	for i, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "start":
			if open != "" {
				t.Fatalf("line %d: child %s started while %s was running:\n%s", i+1, f[1], open, b)
			}
			open = f[1]
			tok, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil || tok <= lastToken {
				t.Fatalf("line %d: token %q not greater than %d", i+1, f[2], lastToken)
			}
			lastToken = tok
			runs++
		case len(f) == 2 && f[0] == "end":
			if open != f[1] {
				t.Fatalf("line %d: end of %s but %q was running", i+1, f[1], open)
			}
			open = ""
		default:
			t.Fatalf("line %d: bad mark %q", i+1, l)
		}
	}
	if open != "" {
		t.Fatalf("child %s never ended", open)
	}
	return runs
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
