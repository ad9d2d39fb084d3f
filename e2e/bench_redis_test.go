package e2e

import "testing"

// BenchmarkRedisHandover is BenchmarkFileHandover on Redis: the waiter is
// woken by the release notification (pub/sub).
func BenchmarkRedisHandover(b *testing.B) {
	benchHandover(b, redisStore.benchEnv(b))
}

// BenchmarkRedisFailover is benchFailover on Redis: nothing is published; a
// waiting instance must notice the record's TTL ran out.
func BenchmarkRedisFailover(b *testing.B) {
	benchFailover(b, redisStore.benchEnv(b))
}
