package e2e

import "testing"

// BenchmarkPostgresHandover is BenchmarkFileHandover on PostgreSQL: the
// waiter is woken by the release statement's NOTIFY.
func BenchmarkPostgresHandover(b *testing.B) {
	benchHandover(b, pgStore.benchEnv(b))
}

// BenchmarkPostgresFailover is benchFailover on PostgreSQL: nothing is
// notified; a waiting instance wakes at the row's expiry as the server
// reported it.
func BenchmarkPostgresFailover(b *testing.B) {
	benchFailover(b, pgStore.benchEnv(b))
}
