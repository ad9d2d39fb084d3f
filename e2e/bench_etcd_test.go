package e2e

import (
	"io"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"
)

// etcdBenchEnv selects the etcd of LEADERRUN_TEST_ETCD_URL (set by
// scripts/test.sh, or scripts/etcd.sh start DIR single); the benchmark is
// skipped without one.
func etcdBenchEnv(b *testing.B) []string {
	url := os.Getenv("LEADERRUN_TEST_ETCD_URL")
	if url == "" {
		b.Skip("LEADERRUN_TEST_ETCD_URL is not set; scripts/etcd.sh starts a server")
	}
	return []string{"LEADERRUN_STORE=" + url}
}

// BenchmarkEtcdHandover is BenchmarkFileHandover on etcd: the waiter is
// woken by its watch of the key.
func BenchmarkEtcdHandover(b *testing.B) {
	benchHandover(b, etcdBenchEnv(b))
}

// BenchmarkEtcdFailover measures crash failover: the leader (leaderrun
// itself) is SIGKILLed, so nothing is released; etcd expires the lease and
// deletes the key, which the waiter's watch sees. Reported as a multiple of
// the TTL (2s), from the kill to the moment the next child runs.
func BenchmarkEtcdFailover(b *testing.B) {
	const ttl = 2 * time.Second
	lat := benchTakeover(b, etcdBenchEnv(b), []string{"--ttl", ttl.String()}, func(leader *exec.Cmd, _ io.Closer) {
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
