package leasetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
