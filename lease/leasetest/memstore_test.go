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
