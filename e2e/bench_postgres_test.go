package e2e

import (
	"io"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"
)

// pgBenchEnv selects the server of LEADERRUN_TEST_POSTGRES_URL (set by
// scripts/bench-postgres.sh or scripts/test.sh); the benchmark is skipped
// without one.
func pgBenchEnv(b *testing.B) []string {
	raw := os.Getenv(pgE2EEnv)
	if raw == "" {
		b.Skip(pgE2EEnv + " is not set; scripts/bench-postgres.sh starts a server")
	}
	return []string{"LEADERRUN_STORE=" + raw}
}

// BenchmarkPostgresHandover is BenchmarkFileHandover on PostgreSQL: the
// waiter is woken by the release statement's NOTIFY.
func BenchmarkPostgresHandover(b *testing.B) {
	benchHandover(b, pgBenchEnv(b))
}

// BenchmarkPostgresFailover measures crash failover: the leader is
// SIGKILLed, so nothing is released or notified; a waiting instance wakes
// at the row's expiry as the server reported it. Reported as a multiple of
// the TTL (2s), from the kill to the moment the next child runs.
func BenchmarkPostgresFailover(b *testing.B) {
	const ttl = 2 * time.Second
	lat := benchTakeover(b, pgBenchEnv(b), []string{"--ttl", ttl.String()}, func(leader *exec.Cmd, _ io.Closer) {
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
