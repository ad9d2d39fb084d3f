package e2e

// Black-box tests of leaderrun (through leaderrun-gcs) on a real Google
// Cloud Storage emulator, fake-gcs-server (LEADERRUN_TEST_GCS_*,
// scripts/fakegcs.sh); tests that freeze or kill the emulator start a
// private one and stop it by PID. The probe's refusal of a server that
// ignores generation preconditions runs against the shared emulator
// behind a proxy in this process that drops them.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

const gcsE2EEnv = "LEADERRUN_TEST_GCS_EMULATOR_HOST"

// gcsStore is the emulator for the shared store tests
// (storefaults_test.go): leaderrun finds it as Google's tools do, by
// STORAGE_EMULATOR_HOST.
func gcsStore(t *testing.T) faultStore {
	requireEnv(t, "LEADERRUN_TEST_GCS_BUCKET")
	return faultStore{
		envVar:      gcsE2EEnv,
		pidVar:      "LEADERRUN_TEST_GCS_PID",
		storeURL:    func(string) string { return "gs://leases/e2e" },
		targetEnv:   func(host string) []string { return []string{"STORAGE_EMULATOR_HOST=" + host} },
		script:      "scripts/fakegcs.sh",
		benchScript: "scripts/fakegcs.sh",
		wakeBy:      "its poll of the object",
	}
}

// The shared store tests on fake-gcs-server. A clean release is seen by
// the waiters at the front of the line at their next read of the object
// (every second); after a leader is SIGKILLed a waiter takes over one TTL
// after it last saw the object's generation change, plus up to a poll.
func TestGCSManyInstancesNoOverlap(t *testing.T) { testManyInstances(t, gcsStore(t)) }
func TestGCSNoWaitConflict(t *testing.T)         { testNoWaitConflict(t, gcsStore(t)) }
func TestGCSCleanHandover(t *testing.T)          { testCleanHandover(t, gcsStore(t)) }
func TestGCSLeaderKilledFailover(t *testing.T)   { testLeaderKilledFailover(t, gcsStore(t)) }
func TestGCSTokensIncrease(t *testing.T)         { testTokensIncrease(t, gcsStore(t)) }

// The emulator frozen (SIGSTOP) or killed under a running leader: the
// child is dead before last_sent + TTL, when a waiter could first take
// over; exit 124 (testServerFault).
func TestGCSServerFaultStopsChild(t *testing.T) { testServerFaults(t, gcsStore(t)) }

// The lease object deleted behind a running leader's back: the next
// renewal finds it gone, the child is stopped at once, exit 124.
func TestGCSObjectDeletedStopsChild(t *testing.T) { testObjectDeleted(t, gcsStore(t), gcsDelete) }

// gcsDelete deletes the object key of the bucket leases at the emulator
// host, as an operator with gcloud storage rm would.
func gcsDelete(t *testing.T, host, key string) {
	t.Helper()
	c, err := storage.NewClient(context.Background(), option.WithEndpoint("http://"+host+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads(), storage.WithDisabledClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bucket("leases").Object(key).Delete(context.Background()); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

// An endpoint that accepts ifGenerationMatch and ignores it is refused
// before anything starts: one line naming it, exit 125, no child.
func TestGCSIgnoredConditionsRefused(t *testing.T) {
	t.Parallel()
	host := requireEnv(t, gcsE2EEnv)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(&url.URL{Scheme: "http", Host: host})
		q := pr.Out.URL.Query()
		q.Del("ifGenerationMatch")
		pr.Out.URL.RawQuery = q.Encode()
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	proxy := srv.Listener.Addr().String()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(lrBin, "--store", "gs://leases/e2e-refused", "--name", "job", "--", "touch", marker)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "STORAGE_EMULATOR_HOST="+proxy, "XDG_CACHE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("exit %v; want 125 (output %q)", err, out)
	}
	msg := strings.TrimSpace(string(out))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, proxy) || !strings.Contains(msg, "conditional writes") {
		t.Errorf("want one line naming %s and conditional writes; got %q", proxy, msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran")
	}
}

// Application Default Credentials that name a file that is not there:
// one line saying no credentials were found, exit 125, no child, and no
// request anywhere (the metadata server is pointed at a closed port on
// this host in case the client looked for it).
func TestGCSNoCredentials(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	missing := filepath.Join(t.TempDir(), "no-such-key.json")
	cmd := exec.Command(lrBin, "--store", "gs://leases", "--name", "job", "--", "touch", marker)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STORAGE_EMULATOR_HOST=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "NO_COLOR=1", "GOOGLE_APPLICATION_CREDENTIALS="+missing, "GCE_METADATA_HOST=127.0.0.1:1", "XDG_CACHE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("exit %v; want 125 (output %q)", err, out)
	}
	msg := strings.TrimSpace(string(out))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "no Google credentials") {
		t.Errorf("want one line saying no Google credentials were found; got %q", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran")
	}
}

// Application Default Credentials end to end, with no request leaving
// this host: a service account key file (a fresh RSA key) whose token_uri
// is a token server in this process, and endpoint= a proxy in front of the
// emulator that lets through only requests bearing the token that server
// gave. leaderrun-gcs runs the child; then, with the proxy refusing the
// token, it stops with one line saying access was denied (exit 125). The
// key is in no output.
func TestGCSServiceAccountKey(t *testing.T) {
	t.Parallel()
	host := requireEnv(t, gcsE2EEnv)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(key))}))
	const token = "ya29.e2e-token-Qm4sV8"
	var tokens atomic.Int32
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.PostForm.Get("assertion") == "" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, token)
	}))
	t.Cleanup(tokenSrv.Close)
	var refuse atomic.Bool
	var bearers atomic.Int32
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: host}) }}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() || r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":{"code":403,"message":"sa@e2e.iam.gserviceaccount.com does not have storage.objects.create access"}}`)
			return
		}
		bearers.Add(1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	keyFile := filepath.Join(t.TempDir(), "key.json")
	doc, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "e2e", "private_key_id": "k1", "private_key": pemKey,
		"client_email": "sa@e2e.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenSrv.URL,
	})
	if err := os.WriteFile(keyFile, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STORAGE_EMULATOR_HOST=") {
			env = append(env, kv)
		}
	}
	env = append(env, "NO_COLOR=1", "GOOGLE_APPLICATION_CREDENTIALS="+keyFile, "GCE_METADATA_HOST=127.0.0.1:1", "XDG_CACHE_HOME="+t.TempDir())
	store := "gs://leases/e2e-sa?endpoint=" + proxy.URL
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(lrBin, "--store", store, "--name", e2eName(t, "sa"), "-v", "--", "touch", marker)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("leaderrun with a service account key: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the child did not run")
	}
	if tokens.Load() == 0 || bearers.Load() == 0 {
		t.Fatalf("token server asked %d times, %d requests with its token; want both", tokens.Load(), bearers.Load())
	}
	refuse.Store(true)
	cmd = exec.Command(lrBin, "--store", store, "--name", e2eName(t, "denied"), "--", "touch", marker+"2")
	cmd.Env = env
	out2, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Fatalf("exit %v; want 125 (output %q)", err, out2)
	}
	msg := strings.TrimSpace(string(out2))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "access denied") || !strings.Contains(msg, "roles/storage.objectUser") {
		t.Errorf("want one line saying access was denied and naming the role; got %q", msg)
	}
	for _, o := range [][]byte{out, out2} {
		if keyLine := strings.Split(pemKey, "\n")[1]; strings.Contains(string(o), keyLine) || strings.Contains(string(o), token) {
			t.Errorf("the key or the token is in the output: %s", o)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
