//go:build leaderrun_clockskew

// Built only into the e2e tests' clock-skew binaries (e2e/clockskew_test.go),
// never by scripts/release.sh, bench.sh or the tests' ordinary build: a
// host whose clock differs from the store's and from its peers', which
// unshare --time cannot make (a time namespace shifts CLOCK_MONOTONIC and
// CLOCK_BOOTTIME, not CLOCK_REALTIME).

package wallclock

import (
	"fmt"
	"os"
	"time"
)

// OffsetVar names the variable with this process's clock offset, a Go
// duration ("-14s"), read once at start-up.
const OffsetVar = "LEADERRUN_TEST_CLOCK_OFFSET"

var offset = func() time.Duration {
	s := os.Getenv(OffsetVar)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "leaderrun: %s=%q: %v\n", OffsetVar, s, err)
		os.Exit(125)
	}
	return d
}()

// Now returns the wall-clock time of a host whose clock is offset from
// this one's. Without a monotonic reading: it is a date as another
// host's clock would give it, not a point on this process's timeline.
func Now() time.Time { return time.Now().Add(offset).Round(0) }
