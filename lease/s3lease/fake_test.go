package s3lease_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/lease/s3lease"
)

// The in-process S3 server the unit tests run against: gofakes3 (v1.2.0
// honours If-None-Match: * and If-Match on PutObject, atomically under its
// backend's lock), behind a real HTTP server on 127.0.0.1.

const (
	testBucket = "leases"
	testKeyID  = "AKIDTESTONLY"
	testSecret = "s3-test-secret-Xq7vB2nP9kLmZ4"
)

// fakeS3 is one gofakes3 server with the bucket testBucket.
type fakeS3 struct {
	backend *s3mem.Backend
	srv     *httptest.Server
}

// startFake starts a gofakes3 server; wrap, when not nil, stands between
// the client and it.
func startFake(t testing.TB, wrap func(http.Handler) http.Handler) *fakeS3 {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fakeS3{backend: be, srv: srv}
}

// url is the store URL of prefix in the fake's bucket.
func (f *fakeS3) url(prefix string) string {
	return "s3://" + testBucket + "/" + prefix + "?endpoint=" + f.srv.URL + "&region=us-east-1"
}

// env is the environment a test store reads: test credentials, and a
// cache directory of the test's own.
func env(t testing.TB) func(string) string {
	m := map[string]string{
		"AWS_ACCESS_KEY_ID":     testKeyID,
		"AWS_SECRET_ACCESS_KEY": testSecret,
		"XDG_CACHE_HOME":        t.TempDir(),
	}
	return func(k string) string { return m[k] }
}

func openStore(t testing.TB, raw string, getenv func(string) string) *s3lease.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := s3lease.Open(ctx, raw, s3lease.Options{Getenv: getenv})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// objects reaches the fake's bucket directly, not through a store.
func (f *fakeS3) objects() leasetest.Objects {
	return leasetest.Objects{
		Get: func(key string) ([]byte, error) {
			o, err := f.backend.GetObject(testBucket, key, nil)
			if err != nil {
				return nil, err
			}
			defer o.Contents.Close()
			return io.ReadAll(o.Contents)
		},
		Put: func(key string, body []byte) error {
			_, err := f.backend.PutObject(testBucket, key, map[string]string{}, bytes.NewReader(body), int64(len(body)), nil)
			return err
		},
		Delete: func(key string) error {
			_, err := f.backend.DeleteObject(testBucket, key)
			return err
		},
	}
}

// put writes an object of the fake directly, as another program would.
func (f *fakeS3) put(t testing.TB, key string, body []byte) {
	t.Helper()
	if err := f.objects().Put(key, body); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}
