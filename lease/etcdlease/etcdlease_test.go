package etcdlease_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	// A dead watch is noticed after two progress checks; make that quick.
	etcdlease.SetProgressEvery(300 * time.Millisecond)
	// The first Open sets gRPC's process-wide logger, which must happen
	// before any gRPC client (the tests' own) exists.
	if s, err := etcdlease.Open(context.Background(), "etcd://127.0.0.1:1", etcdlease.Options{}); err == nil {
		_ = s.Close()
	}
	os.Exit(m.Run())
}

// need returns an integration server URL (see leasetest.RequireEnv).
func need(t *testing.T, key string) string { return leasetest.RequireEnv(t, key) }

// private starts etcd for this test only (so it can be frozen, killed or
// configured with etcdFlags) with scripts/etcd.sh and returns what the
// script wrote to its env.
func private(t *testing.T, topo string, etcdFlags ...string) map[string]string {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil && os.Getenv("CI") == "" {
		t.Skip("etcd not installed")
	}
	return leasetest.StartServer(t, t.TempDir(), "../../scripts/etcd.sh", append([]string{topo}, etcdFlags...)...)
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, url string, o etcdlease.Options) *etcdlease.Store {
	t.Helper()
	s, err := etcdlease.Open(ctxT(t), url, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// plain is an etcd client that is not the store: the "operator" that breaks
// leases and inspects keys behind the store's back.
func plain(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	eps := strings.Split(strings.TrimPrefix(url, "etcd://"), ",")
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func req(name, holder string, ttl time.Duration) lease.Request {
	return lease.Request{Name: name, Label: holder, ID: lease.NewID(), TTL: ttl}
}

func harness(url string, raw *clientv3.Client) leasetest.Harness {
	return leasetest.Harness{
		Open:         leasetest.Opener(etcdlease.Open, url, etcdlease.Options{CallTimeout: time.Second}),
		TTL:          etcdlease.MinTTL,
		TrimsAtStart: true, // the run history is trimmed at a start record, once every keep/10 + 2 runs
		Break: func(t *testing.T, _ lease.Store, name string) {
			if _, err := raw.Delete(ctxT(t), etcdlease.DefaultPrefix+name); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		},
		PutRunEntry: func(t *testing.T, name string, token uint64, value []byte) {
			if _, err := raw.Put(ctxT(t), fmt.Sprintf("%s%s:runs/%016d", etcdlease.DefaultPrefix, name, token), string(value)); err != nil {
				t.Fatalf("Put: %v", err)
			}
		},
	}
}

func TestConformanceSingle(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	leasetest.Run(t, harness(url, plain(t, url)))
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_CLUSTER_URL")
	leasetest.Run(t, harness(url, plain(t, url)))
}

func TestCandidatesSingle(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	leasetest.RunCandidates(t, harness(url, plain(t, url)))
}

func TestCandidatesCluster(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_CLUSTER_URL")
	leasetest.RunCandidates(t, harness(url, plain(t, url)))
}

// TestRefusedSaidAtOnce: a cluster whose endpoints refuse connections is
// "connection refused", as Redis and PostgreSQL say, not "no answer in
// time" after the whole call timeout (the client waits for a ready
// connection until the deadline): with a call timeout of a minute and the
// test's 30 s context, only an answer before either ends says refused.
func TestRefusedSaidAtOnce(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"etcd://127.0.0.1:1", "etcd://127.0.0.1:1,127.0.0.1:2", "etcd://u:pw@127.0.0.1:1"} {
		s := open(t, url, etcdlease.Options{CallTimeout: time.Minute, Getenv: func(string) string { return "" }})
		where := strings.TrimPrefix(url, "etcd://u:pw@")
		where = strings.TrimPrefix(where, "etcd://")
		want := "cannot reach etcd at " + where + ": connection refused"
		_, err := s.Status(ctxT(t), "refused")
		if !errors.Is(err, lease.ErrUnavailable) || err.Error() != want {
			t.Errorf("%s: Status: %v; want ErrUnavailable, %q", url, err, want)
		}
		_, err = s.TryAcquire(ctxT(t), req("refused", "a", 3*time.Second))
		if !errors.Is(err, lease.ErrUnavailable) || err.Error() != want {
			t.Errorf("%s: TryAcquire: %v; want ErrUnavailable, %q", url, err, want)
		}
	}
}

// TestTTLRefused: TTLs etcd cannot grant exactly are refused with ErrConfig
// before anything is sent, and Limits says the same to the timing
// validation. The store points at a listener that accepts connections and
// never answers, so a call that did go out would hang until its CallTimeout:
// a refusal well inside it was made before any call.
func TestTTLRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // owned by the test: the cleanup closes ln and waits
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	const callTimeout = 3 * time.Second
	s := open(t, "etcd://"+ln.Addr().String(), etcdlease.Options{CallTimeout: callTimeout})
	for _, ttl := range []time.Duration{0, time.Second, 1500 * time.Millisecond, 2500 * time.Millisecond, 25 * time.Hour} {
		start := time.Now()
		_, err := s.TryAcquire(ctxT(t), req("ttl", "a", ttl))
		if !errors.Is(err, lease.ErrConfig) || errors.Is(err, lease.ErrUnavailable) {
			t.Fatalf("TTL %v: %v; want ErrConfig", ttl, err)
		}
		if took := time.Since(start); took >= callTimeout/2 {
			t.Fatalf("TTL %v refused after %v: it waited on etcd first", ttl, took)
		}
	}
	// A valid TTL does try to reach it: unavailable (at the CallTimeout),
	// not a config error.
	if _, err := s.TryAcquire(ctxT(t), req("ttl", "a", 3*time.Second)); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("TTL 3s against a server that never answers: %v; want ErrUnavailable", err)
	}
	lim := s.Limits()
	if !lim.Expires || lim.MinTTL != 2*time.Second || lim.TTLUnit != time.Second {
		t.Fatalf("Limits = %+v", lim)
	}
	tm, err := lease.Timing{TTL: 1500 * time.Millisecond}.Resolve(lim)
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Timing.Resolve(1.5s) = %+v, %v; want ErrConfig", tm, err)
	}
}

// TestTokensAreCreateRevisions: over 100 acquisitions of one name (with
// other names written in between), the token is the key's create revision
// and strictly increases.
func TestTokensAreCreateRevisions(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	s := open(t, url, etcdlease.Options{})
	raw := plain(t, url)
	name := "tokens-" + lease.NewID()[:8]
	var last uint64
	for i := 0; i < 100; i++ {
		l, err := s.TryAcquire(ctxT(t), req(name, "h"+strconv.Itoa(i), 2*time.Second))
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		tok := l.Info().Token
		if tok <= last {
			t.Fatalf("acquisition %d: token %d <= previous %d", i, tok, last)
		}
		last = tok
		if i%10 == 0 {
			gr, err := raw.Get(ctxT(t), etcdlease.DefaultPrefix+name)
			if err != nil || len(gr.Kvs) != 1 || uint64(gr.Kvs[0].CreateRevision) != tok {
				t.Fatalf("acquisition %d: key %v (%v); want create revision %d", i, gr, err, tok)
			}
		}
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	t.Logf("last token %d", last)
}

// TestKeyDeletedIsLost: a key deleted by someone else (the etcd lease still
// alive) makes the next renew report ErrLost, and release ErrNotHeld.
func TestKeyDeletedIsLost(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	s := open(t, url, etcdlease.Options{})
	raw := plain(t, url)
	name := "deleted-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), req(name, "a", 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := raw.Delete(ctxT(t), etcdlease.DefaultPrefix+name); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctxT(t)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after the key was deleted: %v; want ErrLost", err)
	}
	// Someone else's key at the same name: still lost, and release leaves it.
	other, err := s.TryAcquire(ctxT(t), req(name, "b", 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctxT(t)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after another took the name: %v; want ErrLost", err)
	}
	if err := l.Release(ctxT(t)); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Release: %v; want ErrNotHeld", err)
	}
	if h, err := s.Status(ctxT(t), name); err != nil || h == nil || h.Label != "b" || h.Token != other.Info().Token {
		t.Fatalf("Status = %+v, %v; want b's lease untouched", h, err)
	}
	if err := other.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireRetryIsIdempotent: the same ID asking again (its first answer
// lost) gets the same token, not ErrHeld.
func TestAcquireRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	s := open(t, url, etcdlease.Options{})
	r := req("retry-"+lease.NewID()[:8], "a", 3*time.Second)
	l1, err := s.TryAcquire(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := s.TryAcquire(ctxT(t), r)
	if err != nil {
		t.Fatalf("retry with the same ID: %v", err)
	}
	if l2.Info().Token != l1.Info().Token {
		t.Fatalf("retry token %d != first %d", l2.Info().Token, l1.Info().Token)
	}
	if err := l2.Renew(ctxT(t)); err != nil {
		t.Fatalf("Renew of the adopted lease: %v", err)
	}
	if err := l2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestStatusRemaining: Status reports the holder's remaining TTL.
func TestStatusRemaining(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	s := open(t, url, etcdlease.Options{})
	name := "status-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), req(name, "a:1", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctxT(t))
	h, err := s.Status(ctxT(t), name)
	if err != nil || h == nil || h.Remaining <= 0 || h.Remaining > 10*time.Second || h.TTL != 10*time.Second || h.ID != "" {
		t.Fatalf("Status = %+v, %v; want remaining in (0, 10s], TTL 10s, no ID", h, err)
	}
}

// TestWaitWakesOnRelease: a clean release wakes a waiter through the watch
// long before the TTL would have run out, twice in a row.
func TestWaitWakesOnRelease(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	a := open(t, url, etcdlease.Options{})
	b := open(t, url, etcdlease.Options{})
	name := "wake-" + lease.NewID()[:8]
	const ttl = 30 * time.Second
	for round := 0; round < 2; round++ {
		la, err := a.TryAcquire(ctxT(t), req(name, "a", ttl))
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.TryAcquire(ctxT(t), req(name, "b", ttl))
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Fatalf("got %v; want HeldError", err)
		}
		done := make(chan time.Time, 1)
		go func() {
			if err := b.Wait(ctxT(t), name, he); err != nil {
				t.Errorf("Wait: %v", err)
			}
			done <- time.Now()
		}()
		released := time.Now()
		if err := la.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		select {
		case woke := <-done:
			t.Logf("round %d: waiter woke %v after the release began", round, woke.Sub(released))
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: waiter still asleep 5s after the release (TTL %v)", round, ttl)
		}
	}
}

// TestFrozenServer: with the server stopped (SIGSTOP), Renew, Status and
// TryAcquire give up within the call timeout (or the caller's earlier
// deadline) and do not claim the lease is lost.
func TestFrozenServer(t *testing.T) {
	t.Parallel()
	env := private(t, "single")
	url, pid := env["LEADERRUN_TEST_ETCD_URL"], leasetest.ServerPID(t, env, "LEADERRUN_TEST_ETCD_PID")
	const callTimeout = 400 * time.Millisecond
	s := open(t, url, etcdlease.Options{CallTimeout: callTimeout})
	name := "frozen-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), req(name, "a", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Freeze(t, pid)
	const slack = 300 * time.Millisecond // scheduling on a busy machine, under -race
	leasetest.FrozenRenew(t, l, callTimeout, 150*time.Millisecond, slack)
	start := time.Now()
	if _, err := s.Status(context.Background(), name); !errors.Is(err, lease.ErrUnavailable) || time.Since(start) > callTimeout+slack {
		t.Fatalf("Status against a frozen server: %v after %v", err, time.Since(start))
	}
	start = time.Now()
	if _, err := s.TryAcquire(context.Background(), req(name+"x", "b", 2*time.Second)); !errors.Is(err, lease.ErrUnavailable) || time.Since(start) > callTimeout+slack {
		t.Fatalf("TryAcquire against a frozen server: %v after %v", err, time.Since(start))
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatalf("Renew after SIGCONT: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestLongerMinimumTTLRefused: a cluster whose election timeout makes its
// shortest lease longer than asked (3 s → 5 s) would silently grant more;
// TryAcquire gives the lease back and refuses with ErrConfig naming the TTL
// to use, and a TTL the cluster grants exactly works.
func TestLongerMinimumTTLRefused(t *testing.T) {
	t.Parallel()
	env := private(t, "single", "--election-timeout=3000")
	url := env["LEADERRUN_TEST_ETCD_URL"]
	s := open(t, url, etcdlease.Options{})
	name := "mintll-" + lease.NewID()[:8]
	_, err := s.TryAcquire(ctxT(t), req(name, "a", 2*time.Second))
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "--ttl 5s") {
		t.Fatalf("TryAcquire with TTL 2s on a 3s election timeout: %v; want ErrConfig saying --ttl 5s", err)
	}
	t.Log(err)
	if h, err := s.Status(ctxT(t), name); err != nil || h != nil {
		t.Fatalf("Status after the refused grant = %+v, %v; want free", h, err)
	}
	l, err := s.TryAcquire(ctxT(t), req(name, "a", 5*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire with TTL 5s: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseLeavesLeaseEmpty: Release deletes the key and leaves the
// etcd lease it was attached to alive with no key, to run out its TTL by
// itself (a revoke would be one more Raft write before leaderrun exits),
// also once the store is closed.
func TestReleaseLeavesLeaseEmpty(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	raw := plain(t, url)
	s, err := etcdlease.Open(ctxT(t), url, etcdlease.Options{CallTimeout: time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	name := "release-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	l, err := s.TryAcquire(ctxT(t), req(name, "a", 30*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	gr, err := raw.Get(ctxT(t), etcdlease.DefaultPrefix+name)
	if err != nil || len(gr.Kvs) != 1 || gr.Kvs[0].Lease == 0 {
		t.Fatalf("the key after TryAcquire: %v, %v; want one key with a lease", gr, err)
	}
	id := clientv3.LeaseID(gr.Kvs[0].Lease)
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if gr, err = raw.Get(ctxT(t), etcdlease.DefaultPrefix+name); err != nil || len(gr.Kvs) != 0 {
		t.Fatalf("the key after Release: %v, %v; want none", gr.Kvs, err)
	}
	ttl, err := raw.TimeToLive(ctxT(t), id, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	if len(ttl.Keys) != 0 || ttl.TTL <= 0 {
		t.Fatalf("the released lease %x: keys %q, TTL %d s; want it alive with no key", int64(id), ttl.Keys, ttl.TTL)
	}
}

// TestReleaseEnding: the end record goes with the release, in one
// transaction, and replaces the run's start record whether that was written
// before it or lands after it; a lease no longer ours writes nothing
// (ErrNotHeld), and an end record of another run is refused.
func TestReleaseEnding(t *testing.T) {
	t.Parallel()
	url := need(t, "LEADERRUN_TEST_ETCD_URL")
	raw, s := plain(t, url), open(t, url, etcdlease.Options{CallTimeout: time.Second})
	name := "ending-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	run := func(startFirst bool, code int) {
		t.Helper()
		l, err := s.TryAcquire(ctxT(t), req(name, "a", etcdlease.MinTTL))
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		start := lease.Run{Name: name, Label: "h:1", Token: l.Info().Token, Start: time.Now().Add(-time.Second).UTC()}
		if startFirst {
			if err := s.RecordRun(ctxT(t), start, 0); err != nil {
				t.Fatalf("RecordRun(start): %v", err)
			}
		}
		end := start
		end.End, end.Outcome, end.ExitCode = time.Now().UTC(), lease.OutcomeFailed, code
		if err := l.(lease.EndingRelease).ReleaseEnding(ctxT(t), start); err == nil {
			t.Fatal("ReleaseEnding took a start record for an end")
		}
		if err := l.(lease.EndingRelease).ReleaseEnding(ctxT(t), end); err != nil {
			t.Fatalf("ReleaseEnding: %v", err)
		}
		if !startFirst {
			if err := s.RecordRun(ctxT(t), start, 0); err != nil { // the start, late
				t.Fatalf("RecordRun(start): %v", err)
			}
		}
	}
	run(true, 3)
	run(false, 4)
	if gr, err := raw.Get(ctxT(t), etcdlease.DefaultPrefix+name); err != nil || len(gr.Kvs) != 0 {
		t.Fatalf("the key after ReleaseEnding: %v, %v; want none", gr.Kvs, err)
	}
	runs, err := s.Runs(ctxT(t), name, 0)
	if err != nil || len(runs) != 2 || !runs[0].Ended() || runs[0].ExitCode != 4 || !runs[1].Ended() || runs[1].ExitCode != 3 {
		t.Fatalf("Runs: %+v, %v; want the two runs, ended with codes 4 and 3", runs, err)
	}

	// The key deleted behind our back: nothing written, ErrNotHeld.
	l, err := s.TryAcquire(ctxT(t), req(name, "b", etcdlease.MinTTL))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := raw.Delete(ctxT(t), etcdlease.DefaultPrefix+name); err != nil {
		t.Fatal(err)
	}
	end := lease.Run{Name: name, Label: "h:1", Token: l.Info().Token, Start: time.Now().Add(-time.Second).UTC(), End: time.Now().UTC(), Outcome: lease.OutcomeOK}
	if err := l.(lease.EndingRelease).ReleaseEnding(ctxT(t), end); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("ReleaseEnding of a deleted key: %v; want ErrNotHeld", err)
	}
	if runs, err := s.Runs(ctxT(t), name, 0); err != nil || len(runs) != 2 {
		t.Fatalf("Runs after a refused ReleaseEnding: %+v, %v; want the two runs only", runs, err)
	}
}

// TestHistoryTrimOncePerSlack: a full history is trimmed back to keep by
// the start record that takes it beyond keep + keep/10 + 1, and by no start
// before it (each trim is a Raft write of its own); an end record never
// trims. Counted with the operator's client, by keys and by the store's
// revision (a write that deletes nothing still moves it), on a server of
// its own: the revision counts every client's writes.
func TestHistoryTrimOncePerSlack(t *testing.T) {
	t.Parallel()
	url := private(t, "single")["LEADERRUN_TEST_ETCD_URL"]
	raw, s := plain(t, url), open(t, url, etcdlease.Options{})
	name := fmt.Sprintf("trim-%d", time.Now().UnixNano())
	l, err := s.TryAcquire(ctxT(t), req(name, "token-source", etcdlease.MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	base := l.Info().Token
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	const keep, slack = 5, 5/10 + 1
	prefix := etcdlease.DefaultPrefix + name + ":runs/"
	count := func() (int64, int64) {
		t.Helper()
		gr, err := raw.Get(ctxT(t), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return gr.Count, gr.Header.Revision
	}
	record := func(i int, ended bool) {
		t.Helper()
		r := lease.Run{Name: name, Label: "h:1", Token: base + uint64(i), Start: time.Now().Add(-time.Minute).UTC()}
		if ended {
			r.End, r.Outcome = time.Now().UTC(), lease.OutcomeOK
		}
		if err := s.RecordRun(ctxT(t), r, keep); err != nil {
			t.Fatalf("RecordRun(%d, ended %v): %v", i, ended, err)
		}
	}
	for i := 1; i <= keep+slack; i++ {
		_, before := count()
		record(i, false)
		n, after := count()
		if n != int64(i) || after != before+1 {
			t.Fatalf("start %d: %d keys, revision +%d; want %d keys and one write (no trim up to keep+slack = %d)", i, n, after-before, i, keep+slack)
		}
		record(i, true)
		if n, _ := count(); n != int64(i) {
			t.Fatalf("end %d: %d keys; want %d (an end replaces its start)", i, n, i)
		}
	}
	_, before := count()
	record(keep+slack+1, false)
	n, after := count()
	if n != keep || after != before+2 {
		t.Fatalf("start %d: %d keys, revision +%d; want %d keys after one write and one trim", keep+slack+1, n, after-before, keep)
	}
	runs, err := s.Runs(ctxT(t), name, 0)
	if err != nil || len(runs) != keep || runs[0].Token != base+keep+slack+1 || runs[keep-1].Token != base+slack+2 {
		t.Fatalf("Runs after the trim = %d runs, %v; want the newest %d, tokens %d down to %d", len(runs), err, keep, base+keep+slack+1, base+slack+2)
	}
}

// A connection slower to set up than the call timeout (a loaded member's
// HTTP/2 preface) is a wait, not a failure: Acquire sets it up within its
// wait (Connect), and a renewal on it answers within the call timeout.
// Before set-up had a budget of its own, gRPC cut every connection attempt
// short at the call timeout, and the wait ended with the store unavailable.
func TestSlowSetupIsAWait(t *testing.T) {
	raw := need(t, "LEADERRUN_TEST_ETCD_URL")
	const callTimeout = 200 * time.Millisecond
	host := strings.TrimPrefix(raw, "etcd://")
	// Longer than gRPC's reconnect backoff (at most 1 s) too: a connection
	// attempt gets the larger of the two.
	proxy, accepted := leasetest.SlowSetup(t, host, 1500*time.Millisecond)
	s := open(t, "etcd://"+proxy, etcdlease.Options{CallTimeout: callTimeout})
	ctx := ctxT(t)
	name := "slow-setup-" + lease.NewID()[:8]
	a, err := lease.Acquire(ctx, s, lease.Request{Name: name, Label: "me", TTL: 10 * time.Second},
		lease.AcquireOptions{Wait: 10 * time.Second, CallTimeout: callTimeout})
	if err != nil {
		t.Fatalf("Acquire with a set-up 7.5 times the call timeout: %v (%d connections)", err, accepted.Load())
	}
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := a.Lease.Renew(rctx); err != nil {
		t.Fatalf("Renew on the connection Acquire set up: %v", err)
	}
	if err := a.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
