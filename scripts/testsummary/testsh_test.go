package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestTestShTimeoutCleansUp: scripts/test.sh running a test that hangs past
// go test's -timeout (TestScenarioHangs, built only with its tag, with a
// Redis server of its own in its temporary directory) says that the
// package timed out and which test was running, stops that server, which
// the test binary's clean-up never did, and removes its working directory;
// and a slow step says it still runs (every second here). It runs the
// suite's set-up (go vet, and of the servers Redis's alone:
// LEADERRUN_TEST_SERVERS).
func TestTestShTimeoutCleansUp(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: install it with `apt-get install --no-install-recommends redis-server` (scripts/test.sh does)")
	}
	pidFile := filepath.Join(t.TempDir(), "redis.pid")
	cmd := exec.Command("../test.sh", "-tags", "leaderrun_timeout_scenario", "-run", "^TestScenarioHangs$", "./scripts/testsummary")
	cmd.Env = append(os.Environ(), "LEADERRUN_TEST_SERVERS=redis", "LEADERRUN_TEST_TIMEOUT=20s", "LEADERRUN_TEST_HEARTBEAT=1", "LEADERRUN_CHAOS_DURATION=0", "LEADERRUN_SCENARIO_PIDFILE="+pidFile)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("scripts/test.sh: %v; want exit 1\n%s", err, out)
	}
	for _, want := range []string{
		"TIMED OUT after 20s (go test -timeout)",
		"running when it timed out: TestScenarioHangs\n",
		"scenario: hanging with a server",
		"(left running by a test)",
		"still running: starting the servers",
		"0 passed, 1 failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scripts/test.sh's output lacks %q", want)
		}
	}
	pidText, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the scenario wrote no PID: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil || pid <= 0 {
		t.Fatalf("PID %q", pidText)
	}
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && strings.Contains(string(cmdline), "redis-server") {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the scenario's redis-server (PID %d) still runs after scripts/test.sh ended", pid)
	}
	// The stopped program is gone too (a zombie, its parent the dead test
	// binary's, is gone; not reaped yet, it has no program any more).
	progText, err := os.ReadFile(pidFile + ".prog")
	if err != nil {
		t.Fatalf("the scenario wrote no program's PID: %v\n%s", err, out)
	}
	if prog, err := os.Readlink("/proc/" + strings.TrimSpace(string(progText)) + "/exe"); err == nil && strings.HasSuffix(prog, "/leaderrun") {
		p, _ := strconv.Atoi(strings.TrimSpace(string(progText)))
		_ = syscall.Kill(p, syscall.SIGKILL)
		t.Errorf("the scenario's stopped program (PID %d, %s) still runs after scripts/test.sh ended", p, prog)
	}
	if !regexp.MustCompile(`== killed \d+ \(tmp/.*/leaderrun\) \(left running by a test\)`).MatchString(out) {
		t.Errorf("scripts/test.sh did not say it killed the stopped program")
	}
	m := regexp.MustCompile(`working in (\S+) \(removed at the end\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("scripts/test.sh did not say where it works:\n%s", out)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("scripts/test.sh left %s behind: %v", m[1], err)
	}
	if t.Failed() {
		t.Logf("scripts/test.sh said:\n%s", out)
	}
}
