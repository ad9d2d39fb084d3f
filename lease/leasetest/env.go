package leasetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// RequireEnv returns the integration-test variable name (an address that
// scripts/test.sh exports after starting a real server on 127.0.0.1). When it
// is missing the test is skipped, except under CI (CI set), where a skipped
// integration test is a failure.
func RequireEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: run the tests with scripts/test.sh", name)
		}
		t.Skipf("%s is not set; scripts/test.sh starts the server", name)
	}
	return v
}

// StartServer starts a server of the test's own with one of the project's
// scripts (`script start dir args...`, e.g. scripts/redis.sh or
// scripts/azurite.sh; a path relative to the test's package directory),
// stops it by PID when the test ends (`script stop dir`), and returns what
// the script wrote to dir/env (LEADERRUN_TEST_* addresses and PIDs).
func StartServer(t testing.TB, dir, script string, args ...string) map[string]string {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(abs, append([]string{"start", dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("%s start: %v\n%s", script, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(abs, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("%s stop: %v\n%s", script, err, out)
		}
	})
	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

// ServerPID returns the PID the script recorded under key, failing the test
// if there is none.
func ServerPID(t testing.TB, env map[string]string, key string) int {
	t.Helper()
	pid, err := strconv.Atoi(env[key])
	if err != nil || pid <= 0 {
		t.Fatalf("no PID %s in the server's env: %v", key, env)
	}
	return pid
}

// SignalServer sends sig to a server process and to its children, for
// servers whose workers are not in its process group (PostgreSQL: every
// backend runs in a session of its own, so SIGSTOP to the postmaster alone
// freezes nothing a client talks to). The parent is stopped first, so it
// forks no new child while the children are signalled, and gets sig last.
func SignalServer(t testing.TB, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	children := childrenOf(pid)
	for _, c := range children {
		_ = syscall.Kill(c, sig) // a child may have exited meanwhile
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal %v to %d: %v", sig, pid, err)
	}
	if sig != syscall.SIGSTOP {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		return
	}
	WaitStopped(t, pid)
	for _, c := range children {
		WaitStopped(t, c)
	}
}

// childrenOf lists the PIDs whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}
