// Package s3lease keeps leaderrun's leases in an S3 bucket (AWS S3, or an
// S3-compatible service that honours conditional writes: Cloudflare R2,
// MinIO, versitygw), through the AWS SDK for Go v2. The lease logic is
// objlease's (its package doc is the safety argument); this package is the
// transport, the URL and the credentials. It is linked only into the
// leaderrun-s3 program.
//
// # URL and credentials
//
// s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION][&path-style=BOOL]
// [&poll=DURATION]. Objects go under PREFIX/ (default leaderrun/). Without
// endpoint= the bucket is AWS's; with it (R2, MinIO, a gateway), requests
// go there, addressed path-style unless path-style=false. The region is
// region=, else the SDK's (AWS_REGION, the profile's), else us-east-1.
// Credentials come from the SDK's default chain, as every AWS tool finds
// them: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and
// AWS_SESSION_TOKEN), AWS_PROFILE with the shared config and credentials
// files, web identity (EKS), the container and instance roles. The URL
// carries none, and nothing of them is ever printed. The SDK reads the
// process's environment for the files and roles, as the aws command does.
//
// # Open
//
// Open checks once that the endpoint honours If-None-Match and If-Match
// (objlease.Probe: four small writes, deleted again) and remembers a pass
// for a day in the user's cache directory; an endpoint that ignores them
// is refused (lease.ErrConfig).
package s3lease

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	"github.com/leaderrun/leaderrun/lease/objlease"
)

// DefaultCallTimeout bounds one store call when Options.CallTimeout is
// zero: a request to a region that may be far away.
const DefaultCallTimeout = 2 * time.Second

// DefaultPoll is how often a waiter looks at a held lease by default
// (poll= changes it): every look is a billed GET.
const DefaultPoll = objlease.DefaultPoll

// The environment variables this store reads a credential from (the SDK
// reads them too; the store passes the ones it was given to the SDK).
const (
	EnvAccessKey    = "AWS_ACCESS_KEY_ID"
	EnvSecretKey    = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken = "AWS_SESSION_TOKEN"
)

// Options tunes a Store; the zero value is usable. CallTimeout bounds
// every request. Getenv reads the AWS_* variables above, AWS_PROFILE,
// AWS_REGION and, for the probe's cache, XDG_CACHE_HOME and HOME. Log
// receives debug lines, never credentials.
type Options = lease.OpenOptions

// Store is a lease.Store in an S3 bucket: objlease's, on this package's
// transport. It is safe for concurrent use; Close it when done.
type Store struct {
	*objlease.Store
	cfg *config
}

var _ lease.Store = (*Store)(nil)

// String returns the store URL without its query.
func (s *Store) String() string { return s.cfg.display }

// Open returns a store for the bucket named by raw (see the package doc),
// after the probe passed.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	o.CallTimeout, o.Getenv, o.Log = storeopt.Defaults(o.CallTimeout, DefaultCallTimeout, o.Getenv, o.Log)
	c, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	client, err := newClient(ctx, c, o.Getenv)
	if err != nil {
		return nil, err
	}
	b := &bucket{c: client, cfg: c}
	// The probe, here for a refusal (access denied, no bucket, conditions
	// ignored) to come at once; a store that does not answer in time is
	// probed again by Connect, within the wait.
	pctx, cancel := context.WithTimeout(ctx, 4*o.CallTimeout)
	defer cancel()
	cache := objlease.ProbeCacheDir(o.Getenv, "s3-probe")
	perr := objlease.Probe(pctx, b, cache)
	if perr != nil && !errors.Is(perr, lease.ErrUnavailable) {
		return nil, perr
	}
	st := objlease.New(objlease.Config{Bucket: b, Store: "S3", CallTimeout: o.CallTimeout, Poll: c.poll, Log: o.Log.With("store", c.display),
		Probed: perr == nil, ProbeCache: cache})
	return &Store{Store: st, cfg: c}, nil
}

// newClient makes the S3 client: the SDK's default chain, with the
// credentials and profile of getenv first, and one attempt per call (the
// keeper retries, within its deadlines).
func newClient(ctx context.Context, c *config, getenv func(string) string) (*s3.Client, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if id, secret := getenv(EnvAccessKey), getenv(EnvSecretKey); id != "" && secret != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, getenv(EnvSessionToken))))
	}
	if p := getenv("AWS_PROFILE"); p != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(p))
	}
	region := c.region
	if region == "" {
		region = getenv("AWS_REGION")
	}
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, storeerr.Config("%s: the AWS configuration cannot be read: %s", c.where(), storeerr.Quote(storeerr.FirstLine(err.Error()), []string{getenv(EnvSecretKey), getenv(EnvSessionToken)}, 8))
	}
	if ac.Region == "" {
		ac.Region = "us-east-1"
	}
	return s3.NewFromConfig(ac, func(so *s3.Options) {
		if c.endpoint != "" {
			so.BaseEndpoint = aws.String(c.endpoint)
		}
		so.UsePathStyle = c.pathStyle
		so.RetryMaxAttempts = 1
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.DisableLogOutputChecksumValidationSkipped = true
	}), nil
}
