package s3lease_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/objlease"
	"github.com/leaderrun/leaderrun/lease/s3lease"
)

// stripConditions plays an S3-compatible server that accepts If-None-Match
// and If-Match on PutObject and ignores them, as several do: it drops the
// headers before gofakes3 sees them.
func stripConditions(which string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				r.Header.Del(which)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// An endpoint that ignores either condition is refused at Open with one
// line naming it, of kind lease.ErrConfig (exit 125), and no lease is ever
// written there.
func TestProbeRefusesIgnoredConditions(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"If-None-Match", "If-Match"} {
		t.Run(h, func(t *testing.T) {
			t.Parallel()
			f := startFake(t, stripConditions(h))
			_, err := s3lease.Open(context.Background(), f.url("p"), s3lease.Options{Getenv: env(t)})
			if !errors.Is(err, lease.ErrConfig) || !errors.Is(err, objlease.ErrIgnoresConditions) {
				t.Fatalf("Open on a server that ignores %s = %v; want ErrConfig and ErrIgnoresConditions", h, err)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, f.srv.URL) || strings.Contains(msg, "\n") || !strings.Contains(msg, h) {
				t.Errorf("message %q: want one line naming %s", msg, f.srv.URL)
			}
			if strings.Contains(msg, testSecret) {
				t.Errorf("message %q holds the secret key", msg)
			}
			keys, err := f.backend.ListBucket(testBucket, nil, gofakes3.ListBucketPage{})
			if err != nil {
				t.Fatal(err)
			}
			if len(keys.Contents) != 0 {
				t.Errorf("the refused probe left %d objects behind", len(keys.Contents))
			}
		})
	}
}

// A passed probe is remembered in the cache directory: the next Open of
// the same bucket writes nothing. Another cache (another user) probes again.
func TestProbeCached(t *testing.T) {
	t.Parallel()
	var puts atomic.Int32
	f := startFake(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				puts.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	getenv := env(t)
	openStore(t, f.url("cached"), getenv).Close()
	first := puts.Load()
	if first < 3 {
		t.Fatalf("the first Open made %d writes; want the probe's (at least 3)", first)
	}
	openStore(t, f.url("cached"), getenv).Close()
	if n := puts.Load() - first; n != 0 {
		t.Errorf("the second Open made %d writes; want none (the pass is cached)", n)
	}
	openStore(t, f.url("cached"), env(t)).Close()
	if n := puts.Load() - first; n < 3 {
		t.Errorf("an Open with another cache made %d writes; want the probe's", n)
	}
}

// The store's errors never hold the secret key, also when the server
// refuses it.
func TestRefusedCredentials(t *testing.T) {
	t.Parallel()
	f := startFake(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>`))
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s3lease.Open(ctx, f.url("p"), s3lease.Options{Getenv: env(t)})
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Open with refused credentials = %v; want ErrConfig", err)
	}
	t.Log(err)
	if msg := err.Error(); strings.Contains(msg, testSecret) || !strings.Contains(msg, "InvalidAccessKeyId") || strings.Contains(msg, "\n") {
		t.Errorf("message %q: want one line naming the refusal, without the secret", msg)
	}
}

// A bucket that does not exist is refused with a line that says so.
func TestNoSuchBucket(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	raw := strings.Replace(f.url("p"), "s3://"+testBucket, "s3://nosuch", 1)
	_, err := s3lease.Open(context.Background(), raw, s3lease.Options{Getenv: env(t)})
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "nosuch does not exist") {
		t.Fatalf("Open of a missing bucket = %v; want ErrConfig saying it does not exist", err)
	}
}

// An endpoint nobody answers on is unavailable, not a configuration error:
// Open leaves the probe to Connect (set-up, within the wait: the store may
// come back), and an attempt fails with lease.ErrUnavailable.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	raw := f.url("p")
	f.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := s3lease.Open(ctx, raw, s3lease.Options{Getenv: env(t), CallTimeout: time.Second})
	if err != nil {
		t.Fatalf("Open of a closed endpoint = %v; want the probe left to Connect", err)
	}
	defer s.Close()
	if err := s.Connect(ctx); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Connect to a closed endpoint = %v; want ErrUnavailable", err)
	}
	if _, err := s.TryAcquire(ctx, lease.Request{Name: "n", Label: "l", ID: lease.NewID(), TTL: 2 * time.Second}); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("TryAcquire on a closed endpoint = %v; want ErrUnavailable", err)
	}
}

// A probe that did not pass when the store was opened (no answer in time)
// runs again at Connect, and until it passes nothing is written: a store
// that ignores conditional writes is refused then, as at Open.
func TestProbeLeftToConnect(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	f := startFake(t, func(next http.Handler) http.Handler {
		return stripConditions("If-None-Match")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "slow down", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		}))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := s3lease.Open(ctx, f.url("late"), s3lease.Options{Getenv: env(t), CallTimeout: time.Second})
	if err != nil {
		t.Fatalf("Open while the store answers 503 = %v; want the probe left to Connect", err)
	}
	defer s.Close()
	down.Store(false)
	if _, err := s.TryAcquire(ctx, lease.Request{Name: "n", Label: "l", ID: lease.NewID(), TTL: 2 * time.Second}); !errors.Is(err, objlease.ErrIgnoresConditions) {
		t.Fatalf("TryAcquire on a store that ignores conditions, probed late = %v; want ErrIgnoresConditions", err)
	}
	keys, err := f.backend.ListBucket(testBucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range keys.Contents {
		if strings.Contains(o.Key, "/lease/") {
			t.Fatalf("lease object %s written before the probe passed", o.Key)
		}
	}
}

// tearReads plays a server that answers a read while a write replaces the
// object with the old content and the new ETag (versitygw 1.8.0 does,
// about one read in four under concurrent writes): the first n reads of a
// lease object get a content that is not the one the ETag names.
func tearReads(n int32) func(http.Handler) http.Handler {
	var torn atomic.Int32
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/lease/") || torn.Add(1) > n {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := strings.Replace(rec.Body.String(), `"holder":"alpha"`, `"holder":"stale"`, 1)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(rec.Code)
			_, _ = w.Write([]byte(body))
		})
	}
}

// A read whose content is not what its ETag names is read again (on a
// store whose ETags are MD5s), so no decision rests on a torn read.
func TestTornReadReadAgain(t *testing.T) {
	t.Parallel()
	f := startFake(t, tearReads(2))
	s := openStore(t, f.url("torn"), env(t))
	defer s.Close()
	ctx := context.Background()
	l, err := s.TryAcquire(ctx, lease.Request{Name: "job", Label: "alpha", ID: lease.NewID(), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Status(ctx, "job")
	if err != nil || h == nil || h.Label != "alpha" || h.Token != l.Info().Token {
		t.Fatalf("Status after torn reads = %+v, %v; want alpha with token %d", h, err, l.Info().Token)
	}
}
