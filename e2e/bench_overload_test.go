package e2e

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkOverloadMargin measures, once per iteration, the margin between
// the death of a leader's child and the end of its lease in the store,
// when the store stops answering: a private Redis server's writes are
// paused (CLIENT PAUSE WRITE) after the leader's first confirmed renewal,
// so only leaderrun's (or its guard's) own deadline can stop the child,
// which ignores SIGTERM and spins on the CPU (the SIGKILL at E − 250 ms is
// what ends it). The child's death is the kernel's (leasetest.WatchDeath),
// the lease's end Redis's own expiry (PEXPIRETIME and TIME, read while
// writes are paused). It reports the smallest and the median margin and
// the number of trials in which the child outlived the lease ("outlived",
// which must be 0).
//
// scripts/bench-overload.sh runs it on an idle machine, beside stress-ng
// and under a CPU limit: with LEADERRUN_BENCH_CGROUP set to a cgroup
// directory, leaderrun (and so its guard and child) is started inside it.
//
//	go test -run '^$' -bench BenchmarkOverloadMargin -benchtime 100x ./e2e
func BenchmarkOverloadMargin(b *testing.B) {
	if os.Getenv(redisStore.envVar) == "" {
		b.Skip(redisStore.envVar + " is not set; scripts/bench-overload.sh starts a server")
	}
	env := leasetest.StartServer(b, b.TempDir(), "scripts/redis.sh", "single")
	addr := env[redisStore.envVar]
	cgroup := os.Getenv("LEADERRUN_BENCH_CGROUP")
	ttl := cmp.Or(os.Getenv("LEADERRUN_BENCH_TTL"), "2s")
	var margins []time.Duration
	outlived := 0
	for i := 0; i < b.N; i++ {
		m, lines := overloadTrial(b, addr, fmt.Sprintf("overload-%d-%d-%d", os.Getpid(), b.N, i), cgroup, ttl)
		margins = append(margins, m)
		if m < 100*time.Millisecond { // for a look at what was late
			b.Logf("trial %d: margin %v; %s", i, m.Round(time.Millisecond), lines[len(lines)-1])
		}
		if m <= 0 {
			outlived++
		}
	}
	slices.Sort(margins)
	b.ReportMetric(float64(margins[0].Milliseconds()), "margin-ms-min")
	b.ReportMetric(float64(margins[len(margins)/2].Milliseconds()), "margin-ms-median")
	b.ReportMetric(float64(outlived), "outlived")
	b.ReportMetric(0, "ns/op")
	var low []string
	for _, m := range margins[:min(5, len(margins))] {
		low = append(low, m.Round(time.Millisecond).String())
	}
	b.Logf("%d trials: margin min %v, median %v, max %v (smallest: %s); the child outlived the lease in %d",
		len(margins), margins[0].Round(time.Millisecond), margins[len(margins)/2].Round(time.Millisecond),
		margins[len(margins)-1].Round(time.Millisecond), strings.Join(low, " "), outlived)
}

// overloadTrial runs one leader on the Redis server at addr (inside cgroup
// when set), pauses the server's writes after its first confirmed renewal,
// and returns the store's expiry minus the child's death, and leaderrun's
// stderr lines.
func overloadTrial(b *testing.B, addr, name, cgroup, ttl string) (time.Duration, []string) {
	b.Helper()
	args := []string{"-v", "--log-format", "json", "--store", "redis://" + addr, "--name", name,
		"--ttl", ttl, "--renew-every", "500ms", "--grace", "300ms",
		"--", "sh", "-c", `trap '' TERM; echo "ready $$"; while :; do :; done`}
	cmd := exec.Command(lrBin, args...)
	if cgroup != "" {
		// Enter the cgroup, then become leaderrun: its guard and child
		// start inside it.
		cmd = exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cgroup, lrBin}, args...)...)
	}
	cmd.Env = testEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	renewed := make(chan struct{})
	stderrDone := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(errPipe)
		seen := false
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if !seen && strings.Contains(sc.Text(), `"event":"renewed"`) {
				seen = true
				close(renewed)
			}
		}
		stderrDone <- lines
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 2 || f[0] != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("child said %q (%v): %s", line, err, strings.Join(<-stderrDone, "\n"))
	}
	child, _ := strconv.Atoi(f[1])
	died := leasetest.WatchDeath(b, child)
	select {
	case <-renewed:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("no renewal in 60s: %s", strings.Join(<-stderrDone, "\n"))
	}
	storeEnd := redisHoldWrites(b, addr, name)
	var death leasetest.Death
	select {
	case death = <-died:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		b.Fatalf("child %d still alive 60s after the store's writes were paused", child)
	}
	werr := cmd.Wait()
	lines := <-stderrDone
	unpause(b, addr)
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 124 {
		b.Fatalf("leaderrun: %v; want exit 124: %s", werr, strings.Join(lines, "\n"))
	}
	// What was late: leaderrun's SIGKILL (its "stopping child" line plus
	// the delay its final line gives) or the child's exit after it.
	offset := time.Now().Sub(time.Unix(0, 0)) - (lease.BootClock{}).Now() // wall − boot
	why := "SIGKILL time unknown"
	var stop time.Time
	for _, l := range lines {
		var m struct {
			Time time.Time
			Msg  string
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Msg == "stopping child" {
			stop = m.Time
		}
	}
	if sm := regexp.MustCompile(`SIGKILL (\S+) later`).FindStringSubmatch(lines[len(lines)-1]); sm != nil && !stop.IsZero() {
		if after, err := time.ParseDuration(sm[1]); err == nil {
			kill := stop.Add(after).Sub(time.Unix(0, 0)) - offset // on the boot clock
			why = fmt.Sprintf("SIGKILL sent %v before the store's expiry (stop signal %v before it), the child's exit seen %v after the SIGKILL",
				(storeEnd - kill).Round(time.Millisecond), (storeEnd - (stop.Sub(time.Unix(0, 0)) - offset)).Round(time.Millisecond), (death.Boot - kill).Round(time.Millisecond))
		}
	}
	return storeEnd - death.Boot, append(lines, why)
}

// unpause ends the CLIENT PAUSE of redisHoldWrites.
func unpause(b *testing.B, addr string) {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		b.Fatalf("CLIENT UNPAUSE: %v", err)
	}
}

// testEnv is this process's environment without its LEADERRUN_ variables.
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEADERRUN_") {
			env = append(env, kv)
		}
	}
	return env
}
