// Package gcslease keeps leaderrun's leases in a Google Cloud Storage
// bucket, through Google's Go client (cloud.google.com/go/storage) on its
// JSON API over HTTP. The lease logic is objlease's (its package doc is
// the safety argument); this package is the transport, the URL and the
// credentials. An object's version is its generation, and every write to
// a lease or counter object is an upload conditional on it
// (ifGenerationMatch=GENERATION, or ifGenerationMatch=0 to create). It is
// linked only into the leaderrun-gcs program.
//
// # URL and credentials
//
// gs://BUCKET[/PREFIX][?user-project=PROJECT][&endpoint=URL]
// [&poll=DURATION]. Objects go under PREFIX/ (default leaderrun/);
// user-project= names the project billed for a Requester Pays bucket;
// endpoint= another address of the JSON API, reached with the credentials
// (Private Service Connect: https://storage-ENDPOINT.p.googleapis.com).
// Credentials are Application Default
// Credentials, as every Google tool finds them: the file
// GOOGLE_APPLICATION_CREDENTIALS names (a service account key, or a
// workload identity federation configuration), gcloud's
// application-default login, or the service account of the machine
// (GCE, GKE's workload identity, Cloud Run). The URL carries none, and
// nothing of them is ever printed. With STORAGE_EMULATOR_HOST set (as
// Google's client reads it: HOST:PORT or a URL) and no endpoint=, requests
// go to that emulator, without credentials.
//
// # Open
//
// Open checks once that the endpoint honours generation preconditions
// (objlease.Probe: four small uploads, deleted again) and remembers a pass
// for a day in the user's cache directory; an endpoint that ignores them
// is refused (lease.ErrConfig).
package gcslease

import (
	"context"
	"errors"
	"net/http"
	"time"

	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/storage"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	"github.com/leaderrun/leaderrun/lease/objlease"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
)

// DefaultCallTimeout bounds one store call when Options.CallTimeout is
// zero: a request to a region that may be far away.
const DefaultCallTimeout = 2 * time.Second

// DefaultPoll is how often a waiter looks at a held lease by default
// (poll= changes it): every look is a billed read.
const DefaultPoll = objlease.DefaultPoll

// The environment variables this store reads. Neither holds a secret:
// GOOGLE_APPLICATION_CREDENTIALS names a file (Google's client reads it
// from the process's environment, as gcloud does).
const (
	EnvCredentials = "GOOGLE_APPLICATION_CREDENTIALS"
	EnvEmulator    = "STORAGE_EMULATOR_HOST"
)

// Options tunes a Store; the zero value is usable. CallTimeout bounds
// every request. Getenv reads STORAGE_EMULATOR_HOST and, for the probe's
// cache, XDG_CACHE_HOME and HOME. Log receives debug lines, never
// credentials.
type Options = lease.OpenOptions

// Store is a lease.Store in a GCS bucket: objlease's, on this package's
// transport. It is safe for concurrent use; Close it when done.
type Store struct {
	*objlease.Store
	cfg    *config
	client *storage.Client
}

var _ lease.Store = (*Store)(nil)

// String returns the store URL without its query.
func (s *Store) String() string { return s.cfg.display }

// Close closes the objlease store, then the client.
func (s *Store) Close() error {
	err := s.Store.Close()
	if s.client != nil {
		_ = s.client.Close()
	}
	return err
}

// Open returns a store for the bucket named by raw (see the package doc),
// after the probe passed.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	o.CallTimeout, o.Getenv, o.Log = storeopt.Defaults(o.CallTimeout, DefaultCallTimeout, o.Getenv, o.Log)
	c, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	if h := o.Getenv(EnvEmulator); h != "" && c.endpoint == "" {
		if c.emulator, err = emulatorURL(h); err != nil {
			return nil, err
		}
	}
	client, err := newClient(ctx, c)
	if err != nil {
		return nil, err
	}
	b := newBucket(client, c)
	// The probe, here for a refusal (access denied, no bucket, conditions
	// ignored) to come at once; a store that does not answer in time is
	// probed again by Connect, within the wait.
	pctx, cancel := context.WithTimeout(ctx, 4*o.CallTimeout)
	defer cancel()
	cache := objlease.ProbeCacheDir(o.Getenv, "gcs-probe")
	perr := objlease.Probe(pctx, b, cache)
	if perr != nil && !errors.Is(perr, lease.ErrUnavailable) {
		_ = client.Close()
		return nil, perr
	}
	st := objlease.New(objlease.Config{Bucket: b, Store: "GCS", CallTimeout: o.CallTimeout, Poll: c.poll, Log: o.Log.With("store", c.display),
		Probed: perr == nil, ProbeCache: cache})
	return &Store{Store: st, cfg: c, client: client}, nil
}

// newClient makes the storage client: JSON API over HTTP, one attempt per
// call (the keeper retries, within its deadlines), no client metrics
// (they would look for a GCP project at start-up), and a transport that
// hands each call the Date of its answer (the store's clock, for the
// tokens). Credentials are Application Default Credentials, found here
// so that their absence is one line at once; an emulator takes none.
func newClient(ctx context.Context, c *config) (*storage.Client, error) {
	var rt http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	opts := []option.ClientOption{storage.WithJSONReads(), storage.WithDisabledClientMetrics(), option.WithoutAuthentication()}
	if c.emulator != "" {
		opts = append(opts, option.WithEndpoint(c.emulator+"/storage/v1/"))
	} else {
		if c.endpoint != "" {
			opts = append(opts, option.WithEndpoint(c.endpoint+"/storage/v1/"))
		}
		// Google's auth library (not oauth2's, which would keep ctx for
		// every later token refresh): tokens are fetched with each
		// request's context.
		creds, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{storage.ScopeReadWrite}})
		if err != nil {
			return nil, storeerr.Config("%s: no Google credentials found (set GOOGLE_APPLICATION_CREDENTIALS to a key or workload identity file, run gcloud auth application-default login, or run with a service account): %s", c.where(), storeerr.Quote(storeerr.FirstLine(err.Error()), nil, 0))
		}
		auth, err := htransport.NewTransport(ctx, rt, option.WithAuthCredentials(creds))
		if err != nil {
			return nil, storeerr.Config("%s: the Google credentials cannot be used: %s", c.where(), storeerr.Quote(storeerr.FirstLine(err.Error()), nil, 0))
		}
		rt = auth
	}
	opts = append(opts, option.WithHTTPClient(&http.Client{Transport: &dateTransport{base: rt}}))
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, storeerr.Config("%s: the Google client cannot be set up: %s", c.where(), storeerr.Quote(storeerr.FirstLine(err.Error()), nil, 0))
	}
	client.SetRetry(storage.WithPolicy(storage.RetryNever))
	return client, nil
}
