//go:build leaderrun_timeout_scenario

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestScenarioHangs is the deliberate time-out of
// TestTestShTimeoutCleansUp, built only with its tag: it starts a Redis
// server in its temporary directory, as the store tests do, writes the
// server's PID where the scenario says, and hangs past go test's -timeout,
// so that the server's clean-up never runs.
func TestScenarioHangs(t *testing.T) {
	env := leasetest.StartServer(t, t.TempDir(), "../redis.sh", "single")
	if err := os.WriteFile(os.Getenv("LEADERRUN_SCENARIO_PIDFILE"), []byte(env["LEADERRUN_TEST_REDIS_PID"]), 0o644); err != nil {
		t.Fatal(err)
	}
	// And a program of its own under its temporary directory, stopped, as
	// a leaderrun a test froze with SIGSTOP.
	prog := filepath.Join(t.TempDir(), "leaderrun")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("LEADERRUN_SCENARIO_PIDFILE")+".prog", []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("scenario: hanging with a server")
	time.Sleep(time.Hour)
}
