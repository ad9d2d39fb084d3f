package e2e

import "testing"

// BenchmarkEtcdHandover is BenchmarkFileHandover on etcd: the waiter is
// woken by its watch of the key.
func BenchmarkEtcdHandover(b *testing.B) {
	benchHandover(b, etcdStore.benchEnv(b))
}

// BenchmarkEtcdFailover is benchFailover on etcd: etcd expires the lease
// and deletes the key, which the waiter's watch sees.
func BenchmarkEtcdFailover(b *testing.B) {
	benchFailover(b, etcdStore.benchEnv(b))
}
