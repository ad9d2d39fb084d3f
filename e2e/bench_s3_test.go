package e2e

import "testing"

// BenchmarkS3Handover is BenchmarkFileHandover on versitygw: the waiter at
// the front of the line sees the release at its next read of the object
// (every second).
func BenchmarkS3Handover(b *testing.B) {
	benchHandover(b, s3Store(b).benchEnv(b))
}

// BenchmarkS3Failover is benchFailover on versitygw: a waiting instance
// takes over one TTL after it last saw the object change, plus up to a
// poll.
func BenchmarkS3Failover(b *testing.B) {
	benchFailover(b, s3Store(b).benchEnv(b))
}
