package e2e

import (
	"io"
	"os"
	"os/exec"
	"sort"
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
	const ttl = 2 * time.Second
	lat := benchTakeover(b, redisBenchEnv(b), []string{"--ttl", ttl.String()}, func(leader *exec.Cmd, _ io.Closer) {
		_ = leader.Process.Kill()
		_ = leader.Wait()
	})
	ratios := make([]float64, len(lat))
	for i, d := range lat {
		ratios[i] = float64(d) / float64(ttl)
	}
	sort.Float64s(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "failover-xTTL-p50")
	b.ReportMetric(ratios[len(ratios)-1], "failover-xTTL-max")
}
