package main

import (
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisBenchEnv selects the Redis server of LEADERRUN_TEST_REDIS (set by
// scripts/bench-redis.sh or scripts/test.sh); the benchmark is skipped
// without one.
func redisBenchEnv(b *testing.B) []string {
	addr := os.Getenv("LEADERRUN_TEST_REDIS")
	if addr == "" {
		b.Skip("LEADERRUN_TEST_REDIS is not set; scripts/bench-redis.sh starts a server")
	}
	return []string{"LEADERRUN_STORE=redis://" + addr}
}

// BenchmarkRedisHandover is BenchmarkFileHandover on Redis: the waiter is
// woken by the release notification (pub/sub).
func BenchmarkRedisHandover(b *testing.B) {
	benchHandover(b, redisBenchEnv(b))
}

// BenchmarkRedisFailover measures crash failover: the leader (leaderrun
// itself) is SIGKILLed, so nothing is released or published; a waiting
// instance must notice the record's TTL ran out. Reported as a multiple of
// the TTL (2s), from the kill to the moment the next child runs.
func BenchmarkRedisFailover(b *testing.B) {
	env := redisBenchEnv(b)
	const ttl = 2 * time.Second
	var ratios []float64
	for i := 0; i < b.N; i++ {
		name := "failover-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
		leader := exec.Command(lrBin, "--name", name, "--ttl", ttl.String(), "--", "sh", "-c", "echo ready; exec sleep 60")
		leader.Env = append(os.Environ(), env...)
		lout, _ := leader.StdoutPipe()
		if err := leader.Start(); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 6)
		if _, err := lout.Read(buf); err != nil {
			b.Fatal(err)
		}
		waiter := exec.Command(lrBin, "--name", name, "--ttl", ttl.String(), "--", "date", "+%s%N")
		waiter.Env = append(os.Environ(), env...)
		wout, _ := waiter.StdoutPipe()
		werr := &lockedBuffer{}
		waiter.Stderr = werr
		if err := waiter.Start(); err != nil {
			b.Fatal(err)
		}
		for !strings.Contains(werr.String(), "waiting") {
			time.Sleep(time.Millisecond) // polling the waiter's stderr until it waits
		}
		t0 := time.Now()
		_ = leader.Process.Kill()
		_ = leader.Wait()
		line := make([]byte, 64)
		n, err := wout.Read(line)
		if err != nil {
			b.Fatal(err, werr.String())
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(line[:n])), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ratios = append(ratios, float64(time.Unix(0, ns).Sub(t0))/float64(ttl))
		_ = waiter.Wait()
	}
	sort.Float64s(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "failover-xTTL-p50")
	b.ReportMetric(ratios[len(ratios)-1], "failover-xTTL-max")
}
