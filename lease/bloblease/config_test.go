package bloblease

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/leaderrun/leaderrun/lease"
)

// env returns a Getenv reading only m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

const testKey = "c2VjcmV0LWtleS1zZWNyZXQta2V5LXNlY3JldC1rZXk=" // base64, fake

func TestParseURL(t *testing.T) {
	tests := []struct {
		raw                         string
		service, account, container string
		fromEnv                     bool
		poll                        time.Duration
		sas                         string
	}{
		{raw: "azblob://myacct/locks", service: "https://myacct.blob.core.windows.net", account: "myacct", container: "locks"},
		{raw: "azblob://myacct", service: "https://myacct.blob.core.windows.net", account: "myacct", container: DefaultContainer},
		{raw: "azblob://myacct/", service: "https://myacct.blob.core.windows.net", account: "myacct", container: DefaultContainer},
		{raw: "AZBLOB://myacct/locks?poll=500ms", service: "https://myacct.blob.core.windows.net", account: "myacct", container: "locks", poll: 500 * time.Millisecond},
		{raw: "azblob:///locks", container: "locks", fromEnv: true},
		{raw: "azblob://", container: DefaultContainer, fromEnv: true},
		{raw: "azblob+https://myacct.blob.core.windows.net/locks", service: "https://myacct.blob.core.windows.net", account: "myacct", container: "locks"},
		{raw: "azblob+https://myacct.privatelink.blob.core.windows.net", service: "https://myacct.privatelink.blob.core.windows.net", account: "myacct", container: DefaultContainer},
		{raw: "azblob+https://myacct.blob.core.windows.net/locks?sv=2022-11-02&sp=rwl&sig=abc%2Bdef%3D&poll=2s",
			service: "https://myacct.blob.core.windows.net", account: "myacct", container: "locks", poll: 2 * time.Second, sas: "sv=2022-11-02&sp=rwl&sig=abc%2Bdef%3D"},
		{raw: "azblob+http://127.0.0.1:10000/devstoreaccount1/locks", service: "http://127.0.0.1:10000/devstoreaccount1", account: "devstoreaccount1", container: "locks"},
		{raw: "azblob+http://127.0.0.1:10000/devstoreaccount1", service: "http://127.0.0.1:10000/devstoreaccount1", account: "devstoreaccount1", container: DefaultContainer},
		{raw: "azblob+http://localhost:10000/devstoreaccount1", service: "http://localhost:10000/devstoreaccount1", account: "devstoreaccount1", container: DefaultContainer},
		{raw: "azblob+http://[::1]:10000/devstoreaccount1/c-1", service: "http://[::1]:10000/devstoreaccount1", account: "devstoreaccount1", container: "c-1"},
		{raw: "azblob+http://azurite:10000/devstoreaccount1/locks", service: "http://azurite:10000/devstoreaccount1", account: "devstoreaccount1", container: "locks"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			got, err := parseURL(tc.raw)
			if err != nil {
				t.Fatalf("parseURL: %v", err)
			}
			want := target{serviceURL: tc.service, account: tc.account, container: tc.container, fromEnv: tc.fromEnv, poll: tc.poll, sas: tc.sas}
			if got != want {
				t.Fatalf("parseURL = %+v; want %+v", got, want)
			}
		})
	}
}

func TestParseURLBad(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"myacct/locks", "want azblob://"},
		{"s3://bucket", "unknown scheme"},
		{"azblob+ftp://h/a/c", "unknown scheme"},
		{"azblob://My_Acct/locks", "not a storage account name"},
		{"azblob://myacct:443/locks", "not a storage account name"},
		{"azblob://myacct/a/b", "one path element"},
		{"azblob:///a/b", "one path element"},
		{"azblob://myacct/Locks", "not a container name"},
		{"azblob://myacct/ab", "not a container name"},
		{"azblob://myacct/a--b", "not a container name"},
		{"azblob+https:///locks", "needs a host"},
		{"azblob+http://127.0.0.1:10000", "needs the account in the path"},
		{"azblob+http://127.0.0.1:10000/devstoreaccount1/c/extra", "path elements"},
		{"azblob+http://127.0.0.1:10000/Dev/c", "not a storage account name"},
		{"azblob://user:hunter2@myacct/locks", "user or password"},
		{"azblob://myacct/locks?poll=fast", "poll="},
		{"azblob://myacct/locks?poll=10ms", "poll="},
		{"azblob://myacct/locks?timeout=5", `unknown query parameter(s) "timeout"`},
		{"azblob://myacct/locks?sv=2022-11-02&sp=r", "no sig="},
		{"azblob://myacct/locks#frag", "fragment"},
		{"azblob://myacct/locks?sig=%zz", "cannot parse"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			_, err := Open(context.Background(), tc.raw, Options{Getenv: env(map[string]string{envKey: testKey})})
			if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) = %v; want ErrConfig containing %q", tc.raw, err, tc.want)
			}
			for _, secret := range []string{"hunter2", "%zz", testKey} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows a secret", err)
				}
			}
		})
	}
}

func TestCredentialOrder(t *testing.T) {
	const (
		sasURL  = "azblob://myacct/locks?sv=2022-11-02&sp=rwl&sig=URLSIG"
		plain   = "azblob://myacct/locks"
		connKey = "DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey=" + testKey + ";EndpointSuffix=core.windows.net"
	)
	tests := []struct {
		name, raw string
		env       map[string]string
		kind      credKind
		service   string
		errWant   string
	}{
		{name: "URL SAS beats env", raw: sasURL, env: map[string]string{envConnString: connKey, envKey: testKey}, kind: credURLSAS},
		{name: "connection string", raw: plain, env: map[string]string{envConnString: connKey, envKey: testKey}, kind: credConnKey},
		{name: "connection string SAS", raw: "azblob:///locks", env: map[string]string{envConnString: "BlobEndpoint=https://myacct.blob.core.windows.net/;SharedAccessSignature=sv=1&sig=CONNSIG", envKey: testKey}, kind: credConnSAS, service: "https://myacct.blob.core.windows.net/locks"},
		{name: "connection string for another account is skipped", raw: plain, env: map[string]string{envConnString: strings.Replace(connKey, "myacct", "other", 1), envKey: testKey}, kind: credKey},
		{name: "account key", raw: plain, env: map[string]string{envKey: testKey}, kind: credKey},
		{name: "key for another account is skipped", raw: plain, env: map[string]string{envKey: testKey, envAccount: "other"}, kind: credDefaultAzC},
		{name: "env SAS", raw: plain, env: map[string]string{envSAS: "?sv=1&sig=ENVSIG"}, kind: credEnvSAS},
		{name: "default credential", raw: plain, env: nil, kind: credDefaultAzC},
		{name: "default credential needs https", raw: "azblob+http://127.0.0.1:10000/devstoreaccount1", env: nil, errWant: "needs https"},
		{name: "short form from connection string", raw: "azblob:///locks", env: map[string]string{envConnString: connKey}, kind: credConnKey, service: "https://myacct.blob.core.windows.net/locks"},
		{name: "short form dev storage", raw: "azblob://", env: map[string]string{envConnString: "UseDevelopmentStorage=true"}, kind: credConnKey, service: devEndpoint + "/leaderrun"},
		{name: "short form from account", raw: "azblob:///locks", env: map[string]string{envAccount: "envacct", envKey: testKey}, kind: credKey, service: "https://envacct.blob.core.windows.net/locks"},
		{name: "short form without account", raw: "azblob:///locks", env: map[string]string{envKey: testKey}, errWant: "neither is set"},
		{name: "bad connection string", raw: plain, env: map[string]string{envConnString: "AccountName=myacct;AccountKey"}, errWant: "KEY=VALUE"},
		{name: "key not base64", raw: plain, env: map[string]string{envKey: "not*base64" + testKey}, errWant: "not valid base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), tc.raw, Options{Getenv: env(tc.env)})
			if tc.errWant != "" {
				if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), tc.errWant) {
					t.Fatalf("Open = %v; want ErrConfig containing %q", err, tc.errWant)
				}
				assertNoSecret(t, err.Error(), testKey, "URLSIG", "CONNSIG", "ENVSIG")
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if s.kind != tc.kind {
				t.Fatalf("credential = %q; want %q", s.kind, tc.kind)
			}
			if tc.service != "" && s.where != tc.service {
				t.Fatalf("container URL = %q; want %q", s.where, tc.service)
			}
			assertNoSecret(t, s.where, testKey, "URLSIG", "CONNSIG", "ENVSIG")
		})
	}
}

func TestGUID(t *testing.T) {
	got, err := guid("0123456789ABCDEF0123456789abcdef")
	if err != nil || got != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Fatalf("guid = %q, %v", got, err)
	}
	for _, bad := range []string{"", "xyz", "0123456789abcdef0123456789abcdeg", "0123456789abcdef0123456789abcdef0"} {
		if _, err := guid(bad); !errors.Is(err, lease.ErrConfig) {
			t.Errorf("guid(%q) = %v; want ErrConfig", bad, err)
		}
	}
}

func TestEscapeMeta(t *testing.T) {
	for _, s := range []string{"host:123", "jörg's laptop", "100%", " padded ", "tab\there", ""} {
		e := escapeMeta(s)
		for i := 0; i < len(e); i++ {
			if e[i] <= ' ' || e[i] >= 0x7f {
				t.Fatalf("escapeMeta(%q) = %q: not a plain header value", s, e)
			}
		}
		if got := unescapeMeta(e); got != s {
			t.Fatalf("unescapeMeta(escapeMeta(%q)) = %q", s, got)
		}
	}
}

// TestRefusedBeforeNetwork proves bad TTLs, names and IDs never reach the service.
func TestRefusedBeforeNetwork(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	raw := "azblob+" + srv.URL + "/devstoreaccount1/locks"
	s, err := Open(context.Background(), raw, Options{Getenv: env(map[string]string{envKey: testKey})})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got := s.Limits(); got != (lease.Limits{Expires: true, Epsilon: time.Second, MinTTL: 15 * time.Second, MaxTTL: 60 * time.Second, TTLUnit: time.Second}) {
		t.Fatalf("Limits = %+v", got)
	}
	tests := []struct {
		name string
		req  lease.Request
		want error
	}{
		{"ttl 10s", lease.Request{Name: "job", ID: lease.NewID(), TTL: 10 * time.Second}, lease.ErrConfig},
		{"ttl 61s", lease.Request{Name: "job", ID: lease.NewID(), TTL: 61 * time.Second}, lease.ErrConfig},
		{"ttl 15.5s", lease.Request{Name: "job", ID: lease.NewID(), TTL: 15500 * time.Millisecond}, lease.ErrConfig},
		{"ttl 0", lease.Request{Name: "job", ID: lease.NewID()}, lease.ErrConfig},
		{"bad id", lease.Request{Name: "job", ID: "holder-1", TTL: 15 * time.Second}, lease.ErrConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.TryAcquire(context.Background(), tc.req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("TryAcquire = %v; want %v", err, tc.want)
			}
			if strings.HasPrefix(tc.name, "ttl") && !strings.Contains(err.Error(), "15s to 60s") {
				t.Fatalf("TTL error %q does not say what is allowed", err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the service; want none", n)
	}
	// And a 500 from the service is transient.
	_, err = s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID(), TTL: 15 * time.Second})
	if !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("TryAcquire against HTTP 500 = %v; want ErrUnavailable", err)
	}
}

// TestOpenLogsNoSecret checks the debug log of Open for secrets.
func TestOpenLogsNoSecret(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, raw := range []string{"azblob://myacct/locks?sv=1&sig=URLSIG", "azblob://myacct/locks"} {
		if _, err := Open(context.Background(), raw, Options{Log: log, Getenv: env(map[string]string{envKey: testKey, envAccount: "other"})}); err != nil {
			t.Fatalf("Open: %v", err)
		}
	}
	if buf.Len() == 0 {
		t.Fatalf("no debug log written")
	}
	assertNoSecret(t, buf.String(), testKey, "URLSIG")
}

func assertNoSecret(t *testing.T, s string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Fatalf("output shows a secret (%s…): %s", sec[:3], s)
		}
	}
}

type failingCred struct{}

func (failingCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("EnvironmentCredential: missing AZURE_TENANT_ID\nmore detail")
}

// TestSignInFailure: a credential that cannot get a token is a config error,
// reported in one line, before any request is sent.
func TestSignInFailure(t *testing.T) {
	s, err := Open(context.Background(), "azblob://myacct/locks", Options{Getenv: env(nil)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if s.kind != credDefaultAzC {
		t.Fatalf("credential %q; want DefaultAzureCredential", s.kind)
	}
	s.cc, err = container.NewClient("https://myacct.blob.core.windows.net/locks", tokenCred{failingCred{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID(), TTL: 15 * time.Second})
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "could not sign in") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("TryAcquire = %q; want one-line ErrConfig saying the sign-in failed", err)
	}
}
