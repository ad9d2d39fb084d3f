package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The file store on hostile or shared ground, driven through the binary.

// asUser is who a leaderrun under test runs as; uid 0 means root. 54321 has
// no passwd entry; both unprivileged ones are in group 54320.
type asUser struct{ uid, gid uint32 }

var (
	e2eRoot   = asUser{}
	e2eNobody = asUser{65534, 65534}
	e2eNoPw   = asUser{54321, 54399}
)

const e2eGroup = 54320

func requireRootE2E(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run leaderrun as other users (CI runs tests as root)")
	}
	// The binary's directory is private to root by default.
	if err := os.Chmod(filepath.Dir(lrBin), 0o755); err != nil {
		t.Fatal(err)
	}
}

// runAs runs leaderrun as u and returns its exit code and stderr. A run that
// does not end within a minute (a hang, or a configuration error retried as
// an unavailable store) fails the test.
func runAs(t *testing.T, u asUser, env []string, args ...string) (int, string) {
	t.Helper()
	p := newLR(t, exec.Command(lrBin, args...))
	p.cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	p.cmd.Dir = "/"
	if u.uid != 0 {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{e2eGroup}}}
	}
	p.begin(false)
	return p.wait(), p.stderr.String()
}

// sharedStore makes a store directory every uid can reach, with mode and
// group gid.
func sharedStore(t *testing.T, mode os.FileMode, gid int) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d = filepath.Join(d, "locks")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

// sharedURL is the store URL of a new sharedStore: with ?shared=world
// when every user may write it.
func sharedURL(t *testing.T, mode os.FileMode, gid int) string {
	t.Helper()
	u := "file://" + sharedStore(t, mode, gid)
	if mode&0o002 != 0 {
		u += "?shared=world"
	}
	return u
}

// A directory every user may write (1777) is refused unless the store URL
// says shared=world: one line naming the fixes, exit 125, no child; with
// it, the run goes on. A group directory needs nothing. (Every user could
// stop, block or take over the jobs of a 1777 directory, which was
// accepted silently.)
func TestFileWorldWritableNeedsOptIn(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "started")
	for _, args := range [][]string{{"--name", "job", "--", "touch", marker}, {"status", "job"}, {"history", "job"}} {
		code, stderr := runLR(t, []string{"LEADERRUN_STORE=file://" + dir}, args...)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != 125 || len(lines) != 1 || !strings.Contains(stderr, "can be written by every user") || !strings.Contains(stderr, "?shared=world") || !strings.Contains(stderr, "2775") {
			t.Fatalf("%v in a 1777 directory: exit %d, %q; want 125 and one line naming the fixes", args, code, stderr)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child was started")
	}
	for _, bad := range []string{"?shared=yes", "?shared=world&shared=world", "?other=1"} {
		if code, stderr := runLR(t, nil, "--store", "file://"+dir+bad, "--name", "job", "--", "touch", marker); code != 125 || !strings.Contains(stderr, "shared=world") {
			t.Fatalf("--store file://DIR%s: exit %d, %q; want 125 naming the one parameter", bad, code, stderr)
		}
	}
	if code, stderr := runLR(t, []string{"LEADERRUN_STORE=file://" + dir + "?shared=world"}, "--name", "job", "--", "touch", marker); code != 0 {
		t.Fatalf("with ?shared=world: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("with ?shared=world the child did not run")
	}
}

// Two users and root take turns on one lease in a pre-created shared
// directory, as the README's /var/lock/leaderrun example does.
func TestFileSharedDirectoryAcrossUsers(t *testing.T) {
	requireRootE2E(t)
	for _, tc := range []struct {
		name string
		mode os.FileMode
		gid  int
	}{
		{"1777", os.ModeSticky | 0o777, 0},
		{"2775", os.ModeSetgid | 0o775, e2eGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"LEADERRUN_STORE=" + sharedURL(t, tc.mode, tc.gid)}
			for _, u := range []asUser{e2eNobody, e2eNoPw, e2eRoot, e2eNobody} {
				if code, stderr := runAs(t, u, env, "-q", "--name", "nightly", "--", "true"); code != 0 {
					t.Fatalf("as uid %d: exit %d: %s", u.uid, code, stderr)
				}
			}
		})
	}
}

// Whatever is planted under a lock file's name, leaderrun (root or not)
// says so in one line and exits 125 at once, even with --wait 1h: no hang,
// no retrying, no link followed, and the child never starts.
func TestFileHostileLockPath(t *testing.T) {
	requireRootE2E(t)
	outside := t.TempDir()
	absent := filepath.Join(outside, "absent")
	marker := filepath.Join(outside, "started")
	plants := []struct {
		name  string
		plant func(path string) error
		says  string
	}{
		{"symlink", func(p string) error { return os.Symlink(absent, p) }, "symbolic link"},
		{"FIFO", func(p string) error { return unix.Mkfifo(p, 0o666) }, "FIFO"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o777) }, "directory"},
	}
	for _, pl := range plants {
		for _, u := range []asUser{e2eRoot, e2eNobody} {
			t.Run(fmt.Sprintf("%s/uid%d", pl.name, u.uid), func(t *testing.T) {
				dir := sharedStore(t, os.ModeSticky|0o777, 0)
				if err := pl.plant(filepath.Join(dir, "job.lock")); err != nil {
					t.Fatal(err)
				}
				code, stderr := runAs(t, u, nil, "--store", "file://"+dir+"?shared=world", "--name", "job", "--wait", "1h", "--", "touch", marker)
				lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
				if code != 125 || len(lines) != 1 || !strings.Contains(lines[0], pl.says) {
					t.Fatalf("exit %d, stderr %q; want 125 and one line saying %q", code, stderr, pl.says)
				}
				if _, err := os.Lstat(absent); err == nil {
					t.Fatal("the symlink was followed")
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the child was started")
				}
			})
		}
	}
}

// Store paths that can never hold lock files are configuration errors at
// once (exit 125, one line), not an unavailable store retried for --wait.
func TestFileUnusableStore(t *testing.T) {
	for _, tc := range []struct{ store, says string }{
		{"file:///proc/self", "procfs"},
		{"file://" + t.TempDir() + "#frag", "#fragment"},
		{"file://" + t.TempDir() + "?", "file:///absolute/directory"},
	} {
		code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + tc.store}, "--wait", "1h", "--name", "x", "--", "true")
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != 125 || len(lines) != 1 || !strings.Contains(lines[0], tc.says) {
			t.Errorf("--store %s: exit %d, stderr %q; want 125 and one line saying %q", tc.store, code, stderr, tc.says)
		}
	}
}

// status, history and check are reads: on a store directory that does not
// exist they create nothing and exit 125 naming it (they read as a free
// lease that never ran: a mistyped --store went unnoticed).
func TestFileStatusCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	for _, args := range [][]string{{"status", "job"}, {"history", "job"}, {"check", "--ran-within", "1h", "job"}} {
		code, stderr := runLR(t, []string{"LEADERRUN_STORE=file://" + dir}, args...)
		if code != 125 || !strings.Contains(stderr, "the file store directory "+dir+" does not exist") {
			t.Errorf("%s: exit %d, %q; want 125 naming the directory", args[0], code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Dir(dir)); err == nil {
		t.Fatalf("status created %s", filepath.Dir(dir))
	}
}

// Deleting the lock file under a running leader stops it at once (its next
// renewal check is an hour away), and the next holder's token is larger.
func TestFileLockDeletedStopsLeaderAtOnce(t *testing.T) {
	dir := t.TempDir()
	env := []string{"LEADERRUN_STORE=file://" + dir}
	leader, child := holdLease(t, env, "gone", "--ttl", "3h", "--renew-every", "1h")
	_, first := statusJSON(t, env, "gone")
	if err := os.Remove(filepath.Join(dir, "gone.lock")); err != nil {
		t.Fatal(err)
	}
	if code := leader.wait(); code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, leader.stderr.String())
	}
	if last := leader.lastLine(); !strings.Contains(last, "lost") || !strings.Contains(last, "removed") {
		t.Fatalf("final line %q does not say the lock file was removed", last)
	}
	waitGone(t, child, 30*time.Second)
	next, _ := holdLease(t, env, "gone")
	_, second := statusJSON(t, env, "gone")
	if f, s := first["token"].(float64), second["token"].(float64); !(s > f) {
		t.Fatalf("token after the lock file was deleted %.0f; want > %.0f", s, f)
	}
	_ = next.cmd.Process.Signal(syscall.SIGTERM)
	next.wait()
}

// A uid without a passwd entry has no default store: leaderrun asks for
// --store instead of trusting $HOME.
func TestFileNoPasswdEntry(t *testing.T) {
	requireRootE2E(t)
	home := t.TempDir()
	code, stderr := runAs(t, e2eNoPw, []string{"HOME=" + home}, "--name", "x", "--", "true")
	if code != 125 || !strings.Contains(stderr, "no home directory for uid 54321") || !strings.Contains(stderr, "--store") {
		t.Fatalf("exit %d, stderr %q; want 125 asking for --store", code, stderr)
	}
}

// A lock file held by a process that is not leaderrun (another user's
// flock(1) on a shared lock file): status says held by an unknown process
// (exit 0), --wait 0 exits 75, and a waiter waits without spinning.
func TestForeignFlock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := "file://" + dir
	env := []string{"LEADERRUN_STORE=" + store}
	// Create the lock file the way leaderrun does, then let flock(1) hold it.
	if code, stderr := runLR(t, env, "--name", "foreign", "--", "true"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	flockHeld(t, filepath.Join(dir, "foreign.lock"))
	p := start(t, env, "status", "foreign")
	got := p.line()
	if code := p.wait(); code != 0 || got != "foreign: held by an unknown process (no leaderrun record)" {
		t.Fatalf("status: exit %d, %q; want 0 and held by an unknown process", code, got)
	}
	if code, stderr := runLR(t, env, "--name", "foreign", "--wait", "0", "--", "true"); code != 75 {
		t.Fatalf("--wait 0: exit %d; want 75: %s", code, stderr)
	}
	// A waiter for a while: its CPU time must be a small part of the wait
	// (it spun at about 90% of a core before).
	const wait = 2 * time.Second
	w := exec.Command(lrBin, "--name", "foreign", "--wait", wait.String(), "--", "true")
	w.Env = append(os.Environ(), env...)
	err := w.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 75 {
		t.Fatalf("waiter: %v; want exit 75 after the wait", err)
	}
	cpu := w.ProcessState.UserTime() + w.ProcessState.SystemTime()
	t.Logf("a waiter used %v of CPU in a %v wait", cpu, wait)
	if cpu > wait/10 {
		t.Fatalf("a waiter used %v of CPU in a %v wait: it spins", cpu, wait)
	}
}

// flockHeld holds an exclusive flock on path from flock(1), a process of its
// own, until the test ends; then it kills flock and the sleep that holds
// the lock with it (their own process group).
func flockHeld(t *testing.T, path string) {
	t.Helper()
	fl := exec.Command("flock", "-x", path, "sh", "-c", "echo locked; exec sleep 300")
	fl.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := fl.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-fl.Process.Pid, syscall.SIGKILL); _ = fl.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("flock(1) said %q, %v", line, err)
	}
}

// A history lock file held by another process: the shared NAME.runs-lock of
// older versions (0666 in a 1777 directory, so any user could hold it) is
// no longer used at all, and this user's own lock (which only it and root
// can open) delays a run by a bounded time: the run keeps its exit code and
// says once per record that the history was not written, naming the lock
// file; history, check and status take no lock and answer at once. (A run
// blocked in flock(2) until the foreign lock went, deaf to TERM, before.)
func TestFileHistoryForeignLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"LEADERRUN_STORE=file://" + dir}
	if code, stderr := runLR(t, env, "--name", "hl", "--", "true"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	legacy := filepath.Join(dir, "hl.runs-lock")
	if err := os.WriteFile(legacy, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	flockHeld(t, legacy)
	if code, stderr := runLR(t, env, "--name", "hl", "--", "true"); code != 0 || strings.Contains(stderr, "not written") {
		t.Fatalf("run with a foreign lock on %s: exit %d, %q; want 0 and history written", legacy, code, stderr)
	}
	own := filepath.Join(dir, fmt.Sprintf("hl~runs-%d-lock", os.Geteuid()))
	flockHeld(t, own)
	began := time.Now()
	code, stderr := runLR(t, env, "--name", "hl", "--", "sh", "-c", "exit 7")
	took := time.Since(began)
	t.Logf("a run with its history lock held took %v: %s", took, stderr)
	if code != 7 || !strings.Contains(stderr, own) {
		t.Fatalf("run with a foreign lock on %s: exit %d, %q; want 7 and a warning naming the lock file", own, code, stderr)
	}
	// Two records (start, end), each bounded by 2s: far from the lock
	// holder's 300s.
	if took > 30*time.Second {
		t.Fatalf("run with its history lock held took %v", took)
	}
	for _, args := range [][]string{{"history", "hl"}, {"check", "--ran-within", "1h", "hl"}, {"status", "hl"}} {
		began := time.Now()
		code, stderr := runLR(t, env, args...)
		if took := time.Since(began); took > 10*time.Second || code != map[string]int{"history": 0, "check": 0, "status": 3}[args[0]] {
			t.Fatalf("%s with the history lock held: exit %d after %v: %s", args[0], code, took, stderr)
		}
	}
}
