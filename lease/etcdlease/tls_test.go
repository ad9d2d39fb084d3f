package etcdlease_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestTLS: etcds:// with ca=, cert= and key= verifies the server, presents
// the client certificate etcd requires and works; an unknown CA, a wrong
// server name or no client certificate is a configuration error at Open, not
// an outage.
func TestTLS(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("etcd"); err != nil && os.Getenv("CI") == "" {
		t.Skip("etcd not installed")
	}
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	leasetest.WriteCerts(t, tlsDir)
	url := leasetest.StartServer(t, dir, "../../scripts/etcd.sh", "tls")["LEADERRUN_TEST_ETCD_TLS_URL"]
	if !strings.HasPrefix(url, "etcds://") {
		t.Fatalf("etcd.sh tls wrote %q", url)
	}
	files := "ca=" + filepath.Join(tlsDir, "ca.crt") + "&cert=" + filepath.Join(tlsDir, "server.crt") + "&key=" + filepath.Join(tlsDir, "server.key")

	a := open(t, url+"?"+files, etcdlease.Options{CallTimeout: time.Second})
	b := open(t, url+"?"+files, etcdlease.Options{CallTimeout: time.Second})
	name := "tls-" + lease.NewID()[:8]
	l, err := a.TryAcquire(ctxT(t), req(name, "a", 5*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire over TLS: %v", err)
	}
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatalf("Renew over TLS: %v", err)
	}
	_, err = b.TryAcquire(ctxT(t), req(name, "b", 5*time.Second))
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("TryAcquire: %v; want HeldError", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctxT(t), name, he) }()
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait over TLS: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the waiter's watch over TLS did not see the release")
	}

	for _, tc := range []struct{ name, query, want string }{
		{"NoCA", "cert=" + filepath.Join(tlsDir, "server.crt") + "&key=" + filepath.Join(tlsDir, "server.key"), "unknown authority"},
		{"WrongServerName", files + "&servername=other.example", "other.example"},
		// etcd runs with --client-cert-auth: without cert= and key= every
		// call would fail its handshake and run out of time, an outage to
		// wait through for ever.
		{"NoClientCert", "ca=" + filepath.Join(tlsDir, "ca.crt"), "demands a client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Open's check is one handshake bounded by the call timeout;
			// a check that runs out of it takes the server for unreachable
			// (an outage, not a configuration error). The timeout is long
			// here so that a loaded machine's slow handshake is still
			// made (beside stress-ng one took over a second), and the
			// refusal must come from the handshake, before it.
			const callTimeout = 10 * time.Second
			start := time.Now()
			s, err := etcdlease.Open(ctxT(t), url+"?"+tc.query, etcdlease.Options{CallTimeout: callTimeout})
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded after %v", time.Since(start))
			}
			if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), tc.want) || time.Since(start) >= callTimeout {
				t.Fatalf("Open: %v after %v; want ErrConfig from the handshake, saying %q", err, time.Since(start), tc.want)
			}
			t.Log(err)
		})
	}

	// etcd:// names plain gRPC: against the TLS port every call only runs
	// out of time. That is a configuration error, saying what to use.
	t.Run("PlainURL", func(t *testing.T) {
		s := open(t, "etcd://"+strings.TrimPrefix(url, "etcds://"), etcdlease.Options{CallTimeout: time.Second})
		_, err := s.TryAcquire(ctxT(t), req("plain-"+lease.NewID()[:8], "a", 5*time.Second))
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "seems to speak TLS") || !strings.Contains(err.Error(), "etcds://") {
			t.Fatalf("TryAcquire: %v; want ErrConfig saying the server speaks TLS", err)
		}
		t.Log(err)
	})
}
