package redislease_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/lease/redislease"
)

// TestTLS: rediss:// with ca= verifies the server and works; without ca=
// the unknown CA is a configuration error, not "unavailable".
func TestTLS(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("CI") == "" {
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	ca := leasetest.WriteCerts(t, filepath.Join(dir, "tls"))
	addr := leasetest.StartServer(t, dir, "../../scripts/redis.sh", "tls")["LEADERRUN_TEST_REDIS_TLS"]

	s := open(t, "rediss://"+addr+"/0?ca="+ca, redislease.Options{CallTimeout: time.Second})
	if err := s.Connect(ctxT(t)); err != nil { // as a run sets up first
		t.Fatalf("Connect over TLS: %v", err)
	}
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "tls", Label: "a", ID: lease.NewID(), TTL: 30 * time.Second})
	if err != nil {
		t.Fatalf("TryAcquire over TLS: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// Open pings within the call timeout and, when the ping is merely slow
	// (a loaded machine: the TLS handshake alone can outlast a second),
	// leaves the verdict to the connection's set-up, which a run makes
	// before its first call, bounded by --wait (Connect). Either way the
	// unknown authority must come out as a configuration error.
	refused := func(what, url string) {
		t.Helper()
		s, err := redislease.Open(ctxT(t), url, redislease.Options{CallTimeout: time.Second})
		if err == nil {
			err = s.Connect(ctxT(t))
			s.Close()
		}
		if !errors.Is(err, lease.ErrConfig) {
			t.Fatalf("%s: %v; want ErrConfig", what, err)
		}
	}
	refused("without ca= (unknown authority)", "rediss://"+addr)
	refused("with a wrong servername", "rediss://"+addr+"?ca="+ca+"&servername=other.example")
}
