package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A --store served by a store program that is not installed: one line
// naming the program and how to install it, exit 125, no child started, and
// no password from the URL in the message.
func TestDispatchMissingStoreProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lone := filepath.Join(dir, "leaderrun")
	b, err := os.ReadFile(lrBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	empty := t.TempDir()
	for scheme, prog := range map[string]string{"redis": "leaderrun-redis", "etcd": "leaderrun-etcd", "postgres": "leaderrun-postgres", "azblob": "leaderrun-azblob", "kubernetes": "leaderrun-kubernetes", "mysql": "leaderrun-mysql", "mariadb": "leaderrun-mysql", "s3": "leaderrun-s3", "gs": "leaderrun-gcs"} {
		cmd := exec.Command(lone, "--store", scheme+"://user:SECRETPW@127.0.0.1:1/x", "--name", "d", "--", "touch", marker)
		// PATH holds no store program: TestDebPackage may have one in
		// /usr/bin at this moment (the run is refused before COMMAND is
		// looked up, so no PATH is needed for touch).
		cmd.Env = []string{"PATH=" + empty, "HOME=" + dir, "NO_COLOR=1"}
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 125 {
			t.Fatalf("%s: %v; want exit 125 (output %q)", scheme, err, out)
		}
		msg := strings.TrimSpace(string(out))
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, prog) || !strings.Contains(msg, "go build -o DIR/ . ./cmd/...") || strings.Contains(msg, "@latest") {
			t.Errorf("%s: want one line naming %s and how to install it; got %q", scheme, prog, msg)
		}
		if strings.Contains(msg, "SECRETPW") {
			t.Errorf("%s: the password is in the message: %q", scheme, msg)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the child ran", scheme)
		}
	}
	// --ping without leaderrun-ping: the same advice, not a `go install
	// …@latest` of a module that is not published.
	cmd := exec.Command(lone, "--ping", "https://hc.example/0b9d1e7c-5f8a", "--name", "d", "--", "touch", marker)
	cmd.Env = []string{"PATH=" + empty, "HOME=" + dir, "NO_COLOR=1"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("--ping: %v; want exit 125 (output %q)", err, out)
	}
	if msg := strings.TrimSpace(string(out)); strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "leaderrun-ping") || !strings.Contains(msg, "go build -o DIR/ . ./cmd/...") || strings.Contains(msg, "@latest") || strings.Contains(msg, "0b9d1e7c") {
		t.Errorf("--ping: want one line naming leaderrun-ping and how to install it, without the URL's path; got %q", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("--ping: the child ran")
	}
}

// A store program's child never sees how leaderrun handed it the run.
func TestDispatchLeavesNoTraceInChildEnv(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	if !strings.Contains(strings.Join(env, " "), "LEADERRUN_STORE=redis://") {
		t.Fatalf("want a Redis store in %q", env)
	}
	code, out, errOut := runLROut(t, env, "-q", "--name", "dispatch-env", "--", "env")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "LEADERRUN_LEASE=dispatch-env") {
		t.Fatalf("the child's environment lacks LEADERRUN_LEASE: %q", out)
	}
	if strings.Contains(out, "LEADERRUN_GUARD_PROGRAM") {
		t.Errorf("the child got LEADERRUN_GUARD_PROGRAM: %q", out)
	}
}

// A store program that is a link to leaderrun (as a packager making
// multi-call links might install it) does not serve the store: the second
// dispatch is refused with one line and 125, instead of leaderrun
// re-executing itself forever at full CPU.
func TestDispatchToLinkRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Symlink(lrBin, filepath.Join(dir, "leaderrun-redis")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(lrBin)
	if err != nil {
		t.Fatal(err)
	}
	lone := filepath.Join(t.TempDir(), "leaderrun")
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	cmd := exec.Command(lone, "--store", "redis://127.0.0.1:1", "--name", "d", "--", "touch", marker)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=" + dir, "NO_COLOR=1"}
	timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 125 {
		t.Fatalf("%v; want exit 125 at once (output %q)", err, out)
	}
	msg := strings.TrimSpace(string(out))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "does not link this store") {
		t.Fatalf("want one line saying the program does not link the store; got %q", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran")
	}
}

// A store program's guard runs from the very image of the leaderrun that
// dispatched to it (the smaller program, passed as a descriptor across
// the execve), and no child inherits that descriptor or the variables
// that name it.
func TestDispatchGuardFromLeaderrunImage(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	p, in := startStdin(t, env, "-v", "--name", "dispatch-guard", "--", "sh", "-c", `ls -l /proc/$$/fd; env; echo listed; read _; true`)
	gpid := guardPID(t, p)
	var out []string
	for l := p.line(); l != "listed"; l = p.line() {
		out = append(out, l)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", gpid))
	if err != nil {
		t.Fatal(err)
	}
	in.Close()
	if c := p.wait(); c != 0 {
		t.Fatalf("exit %d: %s", c, p.stderr.String())
	}
	if exe != lrBin {
		t.Errorf("the guard runs from %s; want leaderrun's image %s", exe, lrBin)
	}
	for _, l := range out {
		if strings.Contains(l, lrBin) || strings.Contains(l, "LEADERRUN_GUARD") {
			t.Errorf("the child inherited %q", l)
		}
	}
}
