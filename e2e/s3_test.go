package e2e

// Black-box tests of leaderrun (through leaderrun-s3) on a real S3
// gateway, versitygw (LEADERRUN_TEST_S3_*, scripts/versitygw.sh); tests
// that freeze or kill the gateway start a private one with the same keys
// and stop it by PID. The probe's refusal of a server that ignores
// conditional writes runs against gofakes3 in this process, behind a
// handler that drops the headers.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

const s3E2EEnv = "LEADERRUN_TEST_S3_ENDPOINT"

// s3Store is the gateway for the shared store tests (storefaults_test.go);
// its credentials are the environment's, read when a test starts.
func s3Store(t testing.TB) faultStore {
	key, secret := requireEnv(t, "LEADERRUN_TEST_S3_ACCESS_KEY"), requireEnv(t, "LEADERRUN_TEST_S3_SECRET_KEY")
	return faultStore{
		envVar:      s3E2EEnv,
		pidVar:      "LEADERRUN_TEST_S3_PID",
		storeURL:    func(endpoint string) string { return "s3://leases/e2e?endpoint=" + endpoint },
		env:         []string{"AWS_ACCESS_KEY_ID=" + key, "AWS_SECRET_ACCESS_KEY=" + secret},
		script:      "scripts/versitygw.sh",
		benchScript: "scripts/versitygw.sh",
		wakeBy:      "its poll of the object",
	}
}

// The shared store tests on versitygw. A clean release is seen by the
// waiters at the front of the line at their next read of the object (every
// second); after a leader is SIGKILLed a waiter takes over one TTL after
// it last saw the object change, plus up to a poll.
func TestS3ManyInstancesNoOverlap(t *testing.T) { testManyInstances(t, s3Store(t)) }
func TestS3NoWaitConflict(t *testing.T)         { testNoWaitConflict(t, s3Store(t)) }
func TestS3CleanHandover(t *testing.T)          { testCleanHandover(t, s3Store(t)) }
func TestS3LeaderKilledFailover(t *testing.T)   { testLeaderKilledFailover(t, s3Store(t)) }
func TestS3TokensIncrease(t *testing.T)         { testTokensIncrease(t, s3Store(t)) }

// The gateway frozen (SIGSTOP) or killed under a running leader: the child
// is dead before last_sent + TTL, when a waiter could first take over;
// exit 124 (testServerFault).
func TestS3ServerFaultStopsChild(t *testing.T) { testServerFaults(t, s3Store(t)) }

// The lease object deleted behind a running leader's back: the next
// renewal finds it gone, the child is stopped at once, exit 124.
func TestS3ObjectDeletedStopsChild(t *testing.T) { testObjectDeleted(t, s3Store(t), s3Delete) }

// s3Delete deletes the object key of the bucket leases at endpoint, as an
// operator with the aws command would.
func s3Delete(t *testing.T, endpoint, key string) {
	t.Helper()
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(os.Getenv("LEADERRUN_TEST_S3_ACCESS_KEY"), os.Getenv("LEADERRUN_TEST_S3_SECRET_KEY"), ""),
	})
	if _, err := c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("leases"), Key: &key}); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

// An endpoint that accepts If-None-Match and If-Match and ignores them is
// refused before anything starts: one line naming it, exit 125, no child,
// and the secret key nowhere in the output.
func TestS3IgnoredConditionsRefused(t *testing.T) {
	t.Parallel()
	be := s3mem.New()
	if err := be.CreateBucket("leases"); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("If-None-Match")
		r.Header.Del("If-Match")
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	const secret = "e2e-s3-secret-Hq3Jv8LpTz"
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(lrBin, "--store", "s3://leases?endpoint="+srv.URL, "--name", "job", "--", "touch", marker)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "AWS_ACCESS_KEY_ID=AKIDE2E", "AWS_SECRET_ACCESS_KEY="+secret, "XDG_CACHE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("exit %v; want 125 (output %q)", err, out)
	}
	msg := strings.TrimSpace(string(out))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, srv.URL) || !strings.Contains(msg, "conditional writes") {
		t.Errorf("want one line naming %s and conditional writes; got %q", srv.URL, msg)
	}
	if strings.Contains(msg, secret) {
		t.Errorf("the secret key is in the output: %q", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran")
	}
}
