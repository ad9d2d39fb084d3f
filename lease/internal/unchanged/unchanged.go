// Package unchanged keeps, for stores without a server-side expiry
// (Kubernetes Leases, S3 and GCS objects), when this process first saw
// each lease's record at its current version. Such a store expires
// nothing: a waiter judges a holder gone when the record has stayed at one
// version for a whole TTL (plus ε) on its own boot clock, as client-go's
// leader election does, so that no two hosts' wall clocks are compared.
package unchanged

import (
	"sync"
	"time"
)

// Since is, per lease name, the version last seen and when (on the boot
// clock, read after the answer arrived) it was first seen. The zero value
// is ready to use; it is safe for concurrent use.
type Since struct {
	mu sync.Mutex
	m  map[string]seen
}

type seen struct {
	version string
	at      time.Duration
}

// See records that name's record has version at now and returns when this
// Since first saw that version: now, when the version is new.
func (s *Since) See(name, version string, now time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]seen)
	}
	if e, ok := s.m[name]; ok && e.version == version {
		return e.at
	}
	s.m[name] = seen{version: version, at: now}
	return now
}
