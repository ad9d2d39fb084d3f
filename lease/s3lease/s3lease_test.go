package s3lease_test

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// ttl is the lease the suite uses: the store allows 1s, but a slot test
// that acquires four slots one after another takes longer than that under
// -race on a loaded 2-core machine, and an unrenewed lease then reads free.
const ttl = 2 * time.Second

func harness(t *testing.T, f *fakeS3, prefix string) leasetest.Harness {
	raw := f.url(prefix)
	getenv := env(t)
	return leasetest.ObjectHarness(func(t *testing.T) lease.Store { return openStore(t, raw, getenv) }, ttl, prefix, f.objects())
}

func TestConformance(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	leasetest.Run(t, harness(t, f, "conformance"))
}

func TestCandidates(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	leasetest.RunCandidates(t, harness(t, f, "candidates"))
}
