package leasetest

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The fake used by the keeper's timing tests must itself be a correct store.
func TestMemStoreConformance(t *testing.T) {
	s := &MemStore{Epsilon: time.Millisecond}
	Run(t, Harness{
		Open:  func(t *testing.T) lease.Store { return s },
		TTL:   300 * time.Millisecond,
		Break: func(t *testing.T, _ lease.Store, name string) { s.Break(name) },
	})
}

// The registry fake used by Acquire's takeover-order tests passes the same
// standby-registry checks as the real stores.
func TestMemCandidatesConformance(t *testing.T) {
	s := &MemCandidates{MemStore: &MemStore{Epsilon: time.Millisecond},
		Timing: lease.CandidateTiming{Heartbeat: true, MinInterval: time.Second, Step: 50 * time.Millisecond}}
	h := Harness{
		Open:  func(t *testing.T) lease.Store { return s },
		TTL:   300 * time.Millisecond,
		Break: func(t *testing.T, _ lease.Store, name string) { s.Break(name) },
	}
	Run(t, h)
	RunCandidates(t, h)
}
