package cmd

import (
	"os"
	"testing"

	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/runner"
)

// TestMain lets the test binary serve as the guard process that runs started
// in-process re-execute (/proc/self/exe is the test binary here), and as the
// death watcher of leasetest.WatchDeath.
func TestMain(m *testing.M) {
	leasetest.DeathWatcherMain()
	if runner.IsGuard(os.Args) {
		os.Exit(runner.GuardMain(os.Args))
	}
	os.Exit(m.Run())
}
