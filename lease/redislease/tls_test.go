package redislease_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
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
	ca := writeCerts(t, filepath.Join(dir, "tls"))
	addr := leasetest.StartServer(t, dir, "../../scripts/redis.sh", "tls")["LEADERRUN_TEST_REDIS_TLS"]

	s := open(t, "rediss://"+addr+"/0?ca="+ca, redislease.Options{CallTimeout: time.Second})
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "tls", Holder: "a", ID: lease.NewID(), TTL: time.Second})
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

// writeCerts makes a CA and a server certificate for 127.0.0.1 in dir and
// returns the CA file's path.
func writeCerts(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leaderrun test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.crt", "CERTIFICATE", caDER)
	write("server.crt", "CERTIFICATE", srvDER)
	write("server.key", "EC PRIVATE KEY", keyDER)
	return filepath.Join(dir, "ca.crt")
}
