package e2e

// --once-per across hosts whose clocks differ, on the stores that have a
// clock of their own (Redis, PostgreSQL, Azure): the period is the one the
// store's clock is in, whatever the clock of the host that takes the lease.
// The contenders are leaderrun built with the tag leaderrun_clockskew
// (internal/wallclock/skew.go): each reads its wall clock offset by
// LEADERRUN_TEST_CLOCK_OFFSET, as a host whose clock is wrong would, for
// every instant it stamps as a date (a holder's since, a run's start and
// end, the acquisition --once-per decides on where tokens count no clock).
// unshare --time cannot make such a host: a time namespace shifts
// CLOCK_MONOTONIC and CLOCK_BOOTTIME, never CLOCK_REALTIME.
//
// Not here: the file store (its contenders share one host, so one clock),
// and etcd and Kubernetes, where each host decides on its own clock
// (docs/usage.md, "Whose clock").

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOncePerSkewedClocks runs testOncePerSkewedClocks on each store at
// once, in one of the package's parallel slots: the stores' ticks share
// the periods' windows, and wait for them, not for a core.
func TestOncePerSkewedClocks(t *testing.T) {
	t.Parallel()
	together(t, map[string]func(*testing.T){
		"redis": func(t *testing.T) {
			_, env := redisE2EShared(t)
			testOncePerSkewedClocks(t, env, "2s", true)
		},
		"postgres": func(t *testing.T) {
			_, env := pgE2EShared(t)
			testOncePerSkewedClocks(t, env, "2s", false) // its history is on the server's clock
		},
		"azure": func(t *testing.T) {
			_, store := azShared(t, "poll=200ms")
			testOncePerSkewedClocks(t, append(azEnv(azDevKey), "LEADERRUN_STORE="+store), "15s", true)
		},
	})
}

var (
	skewBinOnce sync.Once
	skewBin     string // leaderrun built with leaderrun_clockskew
	skewBinErr  error
)

// skewedLeaderrun builds, once, leaderrun and the store programs of the
// stores TestOncePerSkewedClocks runs on (Redis, PostgreSQL, Azure) with
// the tag leaderrun_clockskew beside the ordinary build: not all eleven
// programs, whose links, beside the suite's other builds, took most of
// the test's 154 s.
func skewedLeaderrun(t *testing.T) string {
	t.Helper()
	skewBinOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(lrBin), "clockskew")
		build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-tags", "urfave_cli_no_docs,leaderrun_clockskew", "-o", dir+"/", ".", "./cmd/leaderrun-redis", "./cmd/leaderrun-postgres", "./cmd/leaderrun-azblob")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			skewBinErr = fmt.Errorf("building leaderrun with leaderrun_clockskew: %v: %s", err, out)
		}
		skewBin = filepath.Join(dir, "leaderrun")
	})
	if skewBinErr != nil {
		t.Fatal(skewBinErr)
	}
	return skewBin
}

// The period and the offsets: a host 14 s ahead reads the next period from
// 6 s into one, a host 14 s behind the previous one until 14 s into it.
const (
	skewPeriod = 20 * time.Second
	skewOffset = 14 * time.Second
)

// testOncePerSkewedClocks: three hosts, one 14 s behind the store's clock,
// one on it and one 14 s ahead, tick with --once-per 20s in two periods of
// the store's clock. In the first, 7 s in, the host behind (its clock in
// the period before) runs the job, and the host ahead (its clock already
// in the next period) finds it done; in the second, 1 s in, the host
// behind (its clock still in the first period) runs it again and the others
// find it done. Decided on the hosts' clocks, the host ahead would run in
// the first period and the host behind would skip the second. hostEnds:
// the store's history keeps the end the host wrote (not PostgreSQL's: its
// server's clock), which shows the offset in effect.
func testOncePerSkewedClocks(t *testing.T, env []string, ttl string, hostEnds bool) {
	bin := skewedLeaderrun(t)
	hosts := []struct {
		label  string
		offset time.Duration
	}{{"behind", -skewOffset}, {"exact", 0}, {"ahead", skewOffset}}
	const notNeeded = 3 // --once-per-exit-code: a found-done tick is told from a run
	for attempt := 1; ; attempt++ {
		name := e2eName(t, "skew")
		marks := filepath.Join(t.TempDir(), "marks")
		tick := func(host int) (code int, stderr string) {
			h := hosts[host]
			cmd := exec.Command(bin, "--once-per", skewPeriod.String(), "--once-per-exit-code", fmt.Sprint(notNeeded),
				"--name", name, "--holder", h.label, "--ttl", ttl, "--", "sh", "-c", `echo "$LEADERRUN_LEASE_TOKEN" >> "$0"`, marks)
			cmd.Env = append(append(os.Environ(), "NO_COLOR=1", "TZ=UTC", fmt.Sprintf("LEADERRUN_TEST_CLOCK_OFFSET=%s", h.offset)), env...)
			var b strings.Builder
			cmd.Stderr = &b
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode(), b.String()
			} else if err != nil {
				t.Fatal(err)
			}
			return 0, b.String()
		}
		// expect runs the hosts' ticks in order, the first by limit into
		// the period and the others before its end: the first runs the
		// job, the others find the period done. It returns false, having
		// judged nothing, when a tick ended later than that.
		expect := func(period time.Time, limit time.Duration, order ...int) bool {
			for i, h := range order {
				code, stderr := tick(h)
				if time.Since(period) >= limit || time.Since(period) >= skewPeriod-time.Second {
					t.Logf("attempt %d: host %s's tick ended %v into the period", attempt, hosts[h].label, time.Since(period))
					return false
				}
				limit = skewPeriod
				want, phrase := notNeeded, "already done"
				if i == 0 {
					want, phrase = 0, "no successful run yet"
				}
				if code != want || !strings.Contains(stderr, phrase) || !strings.Contains(stderr, "on the store's clock") {
					t.Fatalf("the store's clock in the period from %s: host %s (clock %+v): exit %d: %s; want %d, %q, on the store's clock",
						period.Format(time.TimeOnly), hosts[h].label, hosts[h].offset, code, stderr, want, phrase)
				}
			}
			return true
		}
		// behind runs, ahead (its clock in the next period) and exact find
		// it done; then, 1 s into the next period, behind (its clock still
		// in the first) runs again.
		first := waitPhase(7 * time.Second)
		ok := expect(first, skewPeriod, 0, 2, 1)
		second := first.Add(skewPeriod)
		if ok {
			sleepUntil(second.Add(time.Second))
			ok = expect(second, skewOffset-time.Second, 0, 2, 1)
		}
		if !ok && attempt < 3 {
			continue // the machine is too slow for the periods' windows this time
		}
		if !ok {
			t.Fatalf("three attempts were slower than the periods allow")
		}

		runs := history(t, env, name, "--limit", "0")
		toks := marked(t, marks)
		if len(runs) != 2 || len(toks) != 2 {
			t.Fatalf("history %+v, children %v; want two runs", runs, toks)
		}
		for i, r := range runs { // newest first
			p := first
			if i == 0 {
				p = second
			}
			at := time.UnixMicro(int64(r.Token))
			if r.Holder != "behind" || r.Outcome != "ok" || at.Before(p) || !at.Before(p.Add(skewPeriod)) {
				t.Fatalf("run %+v (token at %s); want behind's success in the period from %s", r, at.Format(time.TimeOnly), p.Format(time.TimeOnly))
			}
			// The skew was in effect: the end the host behind wrote is on
			// its own clock, 14 s before the store's.
			if d := at.Sub(r.End); hostEnds && (d < skewOffset-3*time.Second || d > skewOffset+3*time.Second) {
				t.Fatalf("run %+v: its end is %v before its token's instant; want about %v (the host behind's clock)", r, d, skewOffset)
			}
		}
		return
	}
}

// waitPhase sleeps until the next instant that lies phase into a period of
// skewPeriod counted from the epoch (as --once-per counts it), and returns
// that period's start.
func waitPhase(phase time.Duration) time.Time {
	p := skewPeriod.Microseconds()
	start := time.UnixMicro(time.Now().UnixMicro() / p * p)
	if time.Since(start) > phase {
		start = start.Add(skewPeriod)
	}
	sleepUntil(start.Add(phase))
	return start
}

// TestClockOffsetOnlyInSkewBuild: leaderrun as released ignores
// LEADERRUN_TEST_CLOCK_OFFSET: the end it records of a run is on this
// host's clock.
func TestClockOffsetOnlyInSkewBuild(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t), "LEADERRUN_TEST_CLOCK_OFFSET=-1h"}
	before := time.Now()
	if code, stderr := runLR(t, env, "--name", "offset", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	runs := history(t, env, "offset")
	if len(runs) != 1 || runs[0].End.Before(before.Add(-time.Second)) || runs[0].End.After(time.Now().Add(time.Second)) {
		t.Fatalf("history %+v; want one run that ended between %s and now", runs, before.Format(time.TimeOnly))
	}
}
