package etcdlease

import "time"

// SetProgressEvery shortens the watch health check for tests (call it from
// TestMain, before any Wait).
func SetProgressEvery(d time.Duration) { progressEvery = d }
