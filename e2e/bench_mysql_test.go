package e2e

import "testing"

// BenchmarkMySQLHandover is BenchmarkFileHandover on MariaDB: the waiter
// at the front of the line sees the release at its next read of the row
// (every 250ms, ±25%).
func BenchmarkMySQLHandover(b *testing.B) {
	benchHandover(b, myStore.benchEnv(b))
}

// BenchmarkMySQLFailover is benchFailover on MariaDB: a waiting instance
// takes over at the row's expiry as the server reported it.
func BenchmarkMySQLFailover(b *testing.B) {
	benchFailover(b, myStore.benchEnv(b))
}
