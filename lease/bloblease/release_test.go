package bloblease

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// A release whose answer comes late, after half the call timeout (a loaded
// service), is still the release it was: the lease was ours, and the
// release freed it. Before, the SDK gave each try half the call timeout and
// retried, and the retry found the lease already released
// (LeaseNotPresentWithLeaseOperation; or another's, once a waiter took
// it): Release said the lease was not ours, and the run exited 124 as if
// its lease had been lost under its child.
func TestSlowReleaseIsOurs(t *testing.T) {
	t.Parallel()
	ep, err := url.Parse(azurite(t))
	if err != nil {
		t.Fatal(err)
	}
	const callTimeout = 2 * time.Second
	var delayed atomic.Int32
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(ep)
		r.Out.URL.Path = r.In.URL.Path // SetURL would put ep's path in front
		r.Out.URL.RawPath = r.In.URL.RawPath
	}}
	// The first release reaches Azurite at once; its answer is held back
	// for 0.7 of the call timeout: past a try of half of it, within the call.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-ms-lease-action") != "release" || delayed.Add(1) != 1 {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		time.Sleep(callTimeout * 7 / 10)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(proxy.Close)
	s := openAzurite(t, proxy.URL+ep.Path, freshContainer(), Options{CallTimeout: callTimeout})
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := s.TryAcquire(ctx, req15("slow-release", "me"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("a release answered after %v of a %v call timeout: %v; want the release", callTimeout*7/10, callTimeout, err)
	}
	if n := delayed.Load(); n != 1 {
		t.Errorf("%d release requests; want 1", n)
	}
	if h, err := s.Status(ctx, "slow-release"); err != nil || h != nil {
		t.Fatalf("status after the release: %+v, %v; want free", h, err)
	}
}
