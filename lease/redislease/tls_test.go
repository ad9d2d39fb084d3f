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
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "tls", Label: "a", ID: lease.NewID(), TTL: time.Second})
	if err != nil {
		t.Fatalf("TryAcquire over TLS: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	_, err = redislease.Open(ctxT(t), "rediss://"+addr, redislease.Options{CallTimeout: time.Second})
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Open without ca=: %v; want ErrConfig (unknown authority)", err)
	}
	_, err = redislease.Open(ctxT(t), "rediss://"+addr+"?ca="+ca+"&servername=other.example", redislease.Options{CallTimeout: time.Second})
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Open with a wrong servername: %v; want ErrConfig", err)
	}
}
