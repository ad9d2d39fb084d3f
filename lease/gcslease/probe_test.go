package gcslease_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/gcslease"
	"github.com/leaderrun/leaderrun/lease/objlease"
	"google.golang.org/api/iterator"
)

// proxy stands in front of the emulator: change, when not nil, edits each
// request on its way.
func (e *emulator) proxy(t *testing.T, change func(r *http.Request)) *httptest.Server {
	target := &url.URL{Scheme: "http", Host: e.host}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		if change != nil {
			change(pr.Out)
		}
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv
}

func envWith(t testing.TB, host string) func(string) string {
	m := map[string]string{"STORAGE_EMULATOR_HOST": host, "XDG_CACHE_HOME": t.TempDir()}
	return func(k string) string { return m[k] }
}

// An endpoint that accepts a generation precondition and ignores it is
// refused at Open with one line naming it, of kind lease.ErrConfig (exit
// 125), and leaves no object behind. Here a proxy drops ifGenerationMatch
// from every upload, as a server that does not implement it would.
func TestProbeRefusesIgnoredConditions(t *testing.T) {
	t.Parallel()
	e := fake(t)
	srv := e.proxy(t, func(r *http.Request) {
		q := r.URL.Query()
		q.Del("ifGenerationMatch")
		r.URL.RawQuery = q.Encode()
	})
	prefix := "refused-" + lease.NewID()[:8]
	_, err := gcslease.Open(context.Background(), e.url(prefix), gcslease.Options{Getenv: envWith(t, srv.Listener.Addr().String())})
	if !errors.Is(err, lease.ErrConfig) || !errors.Is(err, objlease.ErrIgnoresConditions) {
		t.Fatalf("Open on a server that ignores ifGenerationMatch = %v; want ErrConfig and ErrIgnoresConditions", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, srv.Listener.Addr().String()) || strings.Contains(msg, "\n") || !strings.Contains(msg, "ifGenerationMatch") {
		t.Errorf("message %q: want one line naming %s and ifGenerationMatch", msg, srv.Listener.Addr())
	}
	it := e.admin.Bucket(e.bucket).Objects(context.Background(), &storage.Query{Prefix: prefix + "/"})
	if a, err := it.Next(); !errors.Is(err, iterator.Done) {
		t.Errorf("the refused probe left %v behind (%v)", a, err)
	}
}

// A passed probe is remembered in the cache directory: the next Open of
// the same bucket uploads nothing. Another cache (another user) probes
// again.
func TestProbeCached(t *testing.T) {
	t.Parallel()
	e := fake(t)
	var uploads atomic.Int32
	srv := e.proxy(t, func(r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/upload/") {
			uploads.Add(1)
		}
	})
	getenv := envWith(t, srv.Listener.Addr().String())
	raw := e.url("cached-" + lease.NewID()[:8])
	openStore(t, raw, getenv).Close()
	first := uploads.Load()
	if first != 4 {
		t.Fatalf("the first Open made %d uploads; want the probe's 4", first)
	}
	openStore(t, raw, getenv).Close()
	if n := uploads.Load(); n != first {
		t.Errorf("a second Open with the same cache made %d uploads; want none", n-first)
	}
	openStore(t, raw, envWith(t, srv.Listener.Addr().String())).Close()
	if n := uploads.Load(); n != 2*first {
		t.Errorf("an Open with another cache made %d uploads; want the probe's %d", n-first, first)
	}
}

// A bucket that does not exist is one line saying so, of kind
// lease.ErrConfig: leaderrun creates no bucket.
func TestNoSuchBucket(t *testing.T) {
	t.Parallel()
	e := fake(t)
	_, err := gcslease.Open(context.Background(), "gs://no-such-bucket-"+lease.NewID()[:8], gcslease.Options{Getenv: e.env(t)})
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open of a missing bucket = %v; want one line of ErrConfig saying it does not exist", err)
	}
}

// Nothing listening: Open leaves the probe to Connect (set-up, within the
// wait: the store may come back), and an attempt is lease.ErrUnavailable,
// one line naming the emulator, with nothing written.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := gcslease.Open(ctx, "gs://leases", gcslease.Options{Getenv: envWith(t, addr), CallTimeout: time.Second})
	if err != nil {
		t.Fatalf("Open with nothing at %s = %v; want the probe left to Connect", addr, err)
	}
	defer s.Close()
	for what, err := range map[string]error{
		"Connect": s.Connect(ctx),
		"TryAcquire": func() error {
			_, err := s.TryAcquire(ctx, lease.Request{Name: "n", Label: "l", ID: lease.NewID(), TTL: 3 * time.Second})
			return err
		}(),
	} {
		if !errors.Is(err, lease.ErrUnavailable) || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s with nothing at %s = %v; want one line of ErrUnavailable naming it", what, addr, err)
		}
	}
}

// A store URL or emulator address that cannot be right is refused before
// any request, one line of lease.ErrConfig.
func TestBadURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ raw, emulator, want string }{
		{"gs://", "127.0.0.1:1", "names no bucket"},
		{"gs://user:pw@bucket", "127.0.0.1:1", "must not carry credentials"},
		{"gs://Bad_Bucket", "127.0.0.1:1", "not a bucket name"},
		{"gs://bucket?region=us", "127.0.0.1:1", "unknown parameter"},
		{"gs://bucket?endpoint=ftp://x", "127.0.0.1:1", "endpoint="},
		{"gs://bucket?poll=1ms", "127.0.0.1:1", "poll="},
		{"s3://bucket", "127.0.0.1:1", "gs:// URLs"},
		{"gs://bucket", "ftp://127.0.0.1:1", "STORAGE_EMULATOR_HOST"},
	} {
		_, err := gcslease.Open(context.Background(), c.raw, gcslease.Options{Getenv: envWith(t, c.emulator)})
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%q) with STORAGE_EMULATOR_HOST=%s = %v; want one line of ErrConfig with %q", c.raw, c.emulator, err, c.want)
		}
	}
}

// Tokens are the store's clock in µs (the Date of the counter's read),
// or above: so they stay above earlier ones when the counter object is
// deleted. A client that lost the answers' Date would count from 1.
func TestTokensFromStoreClock(t *testing.T) {
	t.Parallel()
	e := fake(t)
	prefix := "clock-" + lease.NewID()[:8]
	s := openStore(t, e.url(prefix), e.env(t))
	defer s.Close()
	before := time.Now().Truncate(time.Second).Add(-time.Second)
	l, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", Label: "a", ID: lease.NewID(), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Info().Token
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tok < uint64(before.UnixMicro()) || tok > uint64(time.Now().Add(time.Minute).UnixMicro()) {
		t.Fatalf("token %d; want the store's clock in µs, about %d", tok, time.Now().UnixMicro())
	}
	if err := e.admin.Bucket(e.bucket).Object(prefix + "/token/job").Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The Date of an answer counts whole seconds: a counter deleted and
	// made again within the second of the last token starts at or below
	// it (objlease's limit, on every object store). Past that second
	// (the emulator runs on this host's clock), it starts above.
	time.Sleep(time.Until(time.UnixMicro(int64(tok)).Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
	l, err = s.TryAcquire(context.Background(), lease.Request{Name: "job", Label: "b", ID: lease.NewID(), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if next := l.Info().Token; next <= tok {
		t.Fatalf("after the counter object was deleted the token went from %d to %d", tok, next)
	}
}
