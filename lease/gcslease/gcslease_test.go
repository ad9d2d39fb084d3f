package gcslease_test

import (
	"context"
	"io"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/gcslease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"google.golang.org/api/option"
)

// The suites against a real GCS emulator process: fake-gcs-server, which
// scripts/fakegcs.sh builds from its Go module and starts on 127.0.0.1
// (scripts/test.sh does).

// ttl is the lease the suites use: the store allows 1s, but a slot test
// that acquires four slots one after another takes longer than that under
// -race on a loaded 2-core machine, and an unrenewed lease then reads free.
const ttl = 2 * time.Second

// emulator is the fake-gcs-server of the environment.
type emulator struct {
	host, bucket string
	admin        *storage.Client
}

func fake(t *testing.T) *emulator {
	e := &emulator{
		host:   leasetest.RequireEnv(t, "LEADERRUN_TEST_GCS_EMULATOR_HOST"),
		bucket: leasetest.RequireEnv(t, "LEADERRUN_TEST_GCS_BUCKET"),
	}
	c, err := storage.NewClient(context.Background(), option.WithEndpoint("http://"+e.host+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads(), storage.WithDisabledClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.admin = c
	return e
}

func (e *emulator) url(prefix string) string { return "gs://" + e.bucket + "/" + prefix }

// env is the environment a test store reads: the emulator, and a cache
// directory of the test's own.
func (e *emulator) env(t testing.TB) func(string) string {
	m := map[string]string{"STORAGE_EMULATOR_HOST": e.host, "XDG_CACHE_HOME": t.TempDir()}
	return func(k string) string { return m[k] }
}

func openStore(t testing.TB, raw string, getenv func(string) string) *gcslease.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := gcslease.Open(ctx, raw, gcslease.Options{Getenv: getenv})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func (e *emulator) harness(t *testing.T, prefix string) leasetest.Harness {
	raw, getenv := e.url(prefix), e.env(t)
	return leasetest.ObjectHarness(func(t *testing.T) lease.Store { return openStore(t, raw, getenv) }, ttl, prefix, e.objects())
}

// objects reaches the emulator's bucket directly, as its administrator.
func (e *emulator) objects() leasetest.Objects {
	ctx := context.Background()
	return leasetest.Objects{
		Get: func(key string) ([]byte, error) {
			r, err := e.admin.Bucket(e.bucket).Object(key).NewReader(ctx)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			return io.ReadAll(r)
		},
		Put: func(key string, body []byte) error {
			w := e.admin.Bucket(e.bucket).Object(key).NewWriter(ctx)
			w.ChunkSize = 0
			if _, err := w.Write(body); err != nil {
				_ = w.Close()
				return err
			}
			return w.Close()
		},
		Delete: func(key string) error { return e.admin.Bucket(e.bucket).Object(key).Delete(ctx) },
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	e := fake(t)
	leasetest.Run(t, e.harness(t, "conformance-"+lease.NewID()[:8]))
}

func TestCandidates(t *testing.T) {
	t.Parallel()
	e := fake(t)
	leasetest.RunCandidates(t, e.harness(t, "candidates-"+lease.NewID()[:8]))
}

// fake-gcs-server honours generation preconditions on uploads, which
// the store's probe checks on Open: shown here on the emulator directly,
// so that a release of it that stopped would fail this test by name, not
// only every Open.
func TestEmulatorHonoursPreconditions(t *testing.T) {
	t.Parallel()
	e := fake(t)
	ctx := context.Background()
	o := e.admin.Bucket(e.bucket).Object("preconditions-" + lease.NewID())
	t.Cleanup(func() { _ = o.Delete(context.Background()) })
	put := func(c storage.Conditions, body string) (int64, error) {
		w := o.If(c).NewWriter(ctx)
		w.ChunkSize = 0
		if _, err := w.Write([]byte(body)); err != nil {
			return 0, err
		}
		if err := w.Close(); err != nil {
			return 0, err
		}
		return w.Attrs().Generation, nil
	}
	g1, err := put(storage.Conditions{DoesNotExist: true}, "one")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := put(storage.Conditions{DoesNotExist: true}, "two"); !isPrecondition(err) {
		t.Errorf("a second create with ifGenerationMatch=0: %v; want HTTP 412", err)
	}
	if _, err := put(storage.Conditions{GenerationMatch: g1 + 1}, "three"); !isPrecondition(err) {
		t.Errorf("a write with ifGenerationMatch of another generation: %v; want HTTP 412", err)
	}
	g2, err := put(storage.Conditions{GenerationMatch: g1}, "four")
	if err != nil || g2 == g1 {
		t.Fatalf("a write with ifGenerationMatch=%d (the object's): generation %d, %v; want a new generation", g1, g2, err)
	}
	if _, err := put(storage.Conditions{GenerationMatch: g1}, "five"); !isPrecondition(err) {
		t.Errorf("a write with ifGenerationMatch of the replaced generation: %v; want HTTP 412", err)
	}
}
