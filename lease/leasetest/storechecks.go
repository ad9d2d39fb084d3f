package leasetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Opener returns a Harness.Open for a store package whose Open has the
// shape of pglease.Open, mysqllease.Open, redislease.Open and
// etcdlease.Open: it opens the store at raw with o, failing the test on an
// error. The suite closes the store.
func Opener[S lease.Store, O any](open func(context.Context, string, O) (S, error), raw string, o O) func(t *testing.T) lease.Store {
	return func(t *testing.T) lease.Store {
		t.Helper()
		s, err := open(ctxT(t), raw, o)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	}
}

// Tokens100 checks that the fencing tokens of 100 acquisitions of one
// name, alternately by a and b (each released before the next), strictly
// increase and stay below 2^53. before, when not nil, runs before the
// acquisition i of the lease name (a test deletes the store's rows of it
// by hand there).
func Tokens100(t *testing.T, a, b lease.Store, before func(i int, name string)) {
	t.Helper()
	name := "tokens-" + lease.NewID()[:8]
	var last uint64
	for i := range 100 {
		s := a
		if i%2 == 1 {
			s = b
		}
		if before != nil {
			before(i, name)
		}
		l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: fmt.Sprint("h", i), ID: lease.NewID(), TTL: 5 * time.Second})
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		tok := l.Info().Token
		if tok <= last || tok >= 1<<53 {
			t.Fatalf("acquisition %d: token %d after %d", i, tok, last)
		}
		last = tok
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// RetrySameID checks that an acquisition retried with the same ID (its
// answer was lost) gets the lease back with the same token and start, and
// that another ID is refused with a lease.HeldError naming the holder's
// label, token, remaining time and TTL.
func RetrySameID(t *testing.T, s lease.Store) {
	t.Helper()
	req := lease.Request{Name: "retry-" + lease.NewID()[:8], Label: "a", ID: lease.NewID(), TTL: 5 * time.Second}
	l1, err := s.TryAcquire(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := s.TryAcquire(ctxT(t), req)
	if err != nil || l2.Info().Token != l1.Info().Token || !l2.Info().Since.Equal(l1.Info().Since) {
		t.Fatalf("retry with the same ID: %v, %+v; want token %d since %v", err, l2, l1.Info().Token, l1.Info().Since)
	}
	req.ID = lease.NewID()
	var he *lease.HeldError
	if _, err := s.TryAcquire(ctxT(t), req); !errors.As(err, &he) || he.By.Token != l1.Info().Token || he.By.Remaining <= 0 || he.By.TTL != 5*time.Second || he.By.Label != "a" {
		t.Fatalf("other ID: %v (%+v); want held by a with token %d, remaining time and TTL", err, he, l1.Info().Token)
	}
	if err := l1.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// PrivateServer starts a server of the test's own with script (see
// StartServer) and returns its URL and PID, which the script writes under
// urlKey and pidKey. installed says whether the server's programs are on
// this host; when they are not, the test is skipped, except under CI (CI
// set), where the start then fails the test.
func PrivateServer(t *testing.T, script, urlKey, pidKey string, installed func() bool) (string, int) {
	t.Helper()
	if os.Getenv("CI") == "" && !installed() {
		t.Skipf("%s: the server is not installed", script)
	}
	env := StartServer(t, t.TempDir(), script)
	if env[urlKey] == "" {
		t.Fatalf("%s wrote no URL", script)
	}
	return env[urlKey], ServerPID(t, env, pidKey)
}

// Server is a store server of the test's own, which the test may freeze,
// thaw and kill (see StartServer).
type Server struct {
	// Freeze stops the server (SIGSTOP) and returns once it answers
	// nothing; Thaw resumes it; Kill ends it (SIGKILL).
	Freeze, Thaw, Kill func()
	// Secret is the password of the store's URL: no error may show it.
	Secret string
}

// FrozenAndKilled checks renewals of a lease the store s of srv grants:
// a renew against the frozen server fails within the caller's deadline
// (300 ms, plus a second of scheduling slack: the store's call timeout
// must be longer) with lease.ErrUnavailable, the lease survives the thaw,
// and a renew against the killed server fails within the deadline too,
// without showing srv.Secret.
func FrozenAndKilled(t *testing.T, s lease.Store, srv Server) {
	t.Helper()
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "frozen", Label: "a", ID: lease.NewID(), TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 300 * time.Millisecond
	renew := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		err := l.Renew(ctx)
		return time.Since(start), err
	}
	srv.Freeze()
	took, err := renew()
	srv.Thaw()
	if !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("renew against a frozen server: %v; want ErrUnavailable", err)
	}
	// Bound: the deadline plus scheduling slack on a loaded machine; the
	// call timeout must not be what ended it.
	if took > deadline+time.Second {
		t.Fatalf("renew against a frozen server took %v; deadline %v", took, deadline)
	}
	t.Logf("frozen: renew failed after %v: %v", took, err)
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatalf("renew after the thaw: %v", err)
	}
	srv.Kill()
	took, err = renew()
	if !errors.Is(err, lease.ErrUnavailable) || took > deadline+time.Second {
		t.Fatalf("renew against a killed server: %v after %v; want ErrUnavailable within %v", err, took, deadline)
	}
	t.Logf("killed: renew failed after %v: %v", took, err)
	if srv.Secret == "" {
		t.Fatal("the server's URL has no password to look for in the errors")
	}
	if strings.Contains(err.Error(), srv.Secret) {
		t.Fatalf("error shows the password: %v", err)
	}
}
