package s3lease_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// The suites against a real S3 gateway process: versitygw, which
// scripts/versitygw.sh builds from its Go module and starts on 127.0.0.1
// (scripts/test.sh does).

// gateway is the versitygw instance of the environment.
type gateway struct {
	endpoint, bucket, key, secret string
	admin                         *s3.Client
}

func vgw(t *testing.T) *gateway {
	g := &gateway{
		endpoint: leasetest.RequireEnv(t, "LEADERRUN_TEST_S3_ENDPOINT"),
		bucket:   leasetest.RequireEnv(t, "LEADERRUN_TEST_S3_BUCKET"),
		key:      leasetest.RequireEnv(t, "LEADERRUN_TEST_S3_ACCESS_KEY"),
		secret:   leasetest.RequireEnv(t, "LEADERRUN_TEST_S3_SECRET_KEY"),
	}
	g.admin = s3.New(s3.Options{
		BaseEndpoint: aws.String(g.endpoint), Region: "us-east-1", UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(g.key, g.secret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	return g
}

func (g *gateway) url(prefix string) string {
	return "s3://" + g.bucket + "/" + prefix + "?endpoint=" + g.endpoint
}

func (g *gateway) env(t testing.TB) func(string) string {
	m := map[string]string{"AWS_ACCESS_KEY_ID": g.key, "AWS_SECRET_ACCESS_KEY": g.secret, "XDG_CACHE_HOME": t.TempDir()}
	return func(k string) string { return m[k] }
}

func (g *gateway) harness(t *testing.T, prefix string) leasetest.Harness {
	raw, getenv := g.url(prefix), g.env(t)
	return leasetest.ObjectHarness(func(t *testing.T) lease.Store { return openStore(t, raw, getenv) }, ttl, prefix, g.objects())
}

// objects reaches the gateway's bucket directly, as its administrator.
func (g *gateway) objects() leasetest.Objects {
	ctx := context.Background()
	return leasetest.Objects{
		Get: func(key string) ([]byte, error) {
			out, err := g.admin.GetObject(ctx, &s3.GetObjectInput{Bucket: &g.bucket, Key: &key})
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		},
		Put: func(key string, body []byte) error {
			_, err := g.admin.PutObject(ctx, &s3.PutObjectInput{Bucket: &g.bucket, Key: &key, Body: bytes.NewReader(body)})
			return err
		},
		Delete: func(key string) error {
			_, err := g.admin.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &g.bucket, Key: &key})
			return err
		},
	}
}

func TestVersitygwConformance(t *testing.T) {
	t.Parallel()
	g := vgw(t)
	leasetest.Run(t, g.harness(t, "conformance-"+lease.NewID()[:8]))
}

func TestVersitygwCandidates(t *testing.T) {
	t.Parallel()
	g := vgw(t)
	leasetest.RunCandidates(t, g.harness(t, "candidates-"+lease.NewID()[:8]))
}
