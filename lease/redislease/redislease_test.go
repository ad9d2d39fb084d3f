package redislease_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/lease/redislease"
	"github.com/redis/go-redis/v9"
)

// need returns an integration server address (see leasetest.RequireEnv).
func need(t *testing.T, key string) string { return leasetest.RequireEnv(t, key) }

// private starts a redis-server for this test only (so it can be frozen,
// killed or reconfigured) and returns its address and PID.
func private(t *testing.T) (addr string, pid int) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("CI") == "" {
		t.Skip("redis-server not installed")
	}
	env := leasetest.StartServer(t, t.TempDir(), "../../scripts/redis.sh")
	if env["LEADERRUN_TEST_REDIS"] == "" {
		t.Fatalf("redis.sh wrote no address: %v", env)
	}
	return env["LEADERRUN_TEST_REDIS"], leasetest.ServerPID(t, env, "LEADERRUN_TEST_REDIS_PID")
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, url string, o redislease.Options) *redislease.Store {
	t.Helper()
	s, err := redislease.Open(ctxT(t), url, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// plain is a go-redis client that is not the store: the "operator" that
// breaks leases and inspects keys behind the store's back.
func plain(t *testing.T, addrs []string, cluster bool) redis.UniversalClient {
	t.Helper()
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: cluster})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func harness(url string, raw redis.UniversalClient) leasetest.Harness {
	return leasetest.Harness{
		Open: leasetest.Opener(redislease.Open, url, redislease.Options{CallTimeout: time.Second}),
		TTL:  300 * time.Millisecond,
		Break: func(t *testing.T, _ lease.Store, name string) {
			if err := raw.Del(ctxT(t), "leaderrun:{"+name+"}").Err(); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		},
		PutRunEntry: func(t *testing.T, name string, token uint64, value []byte) {
			z := redis.Z{Score: float64(token), Member: string(value)}
			if err := raw.ZAdd(ctxT(t), "leaderrun:{"+name+"}:runs", z).Err(); err != nil {
				t.Fatalf("ZADD: %v", err)
			}
		},
	}
}

func TestConformanceSingle(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	leasetest.Run(t, harness("redis://"+addr+"/0", plain(t, []string{addr}, false)))
}

func TestConformanceCluster(t *testing.T) {
	addrs := need(t, "LEADERRUN_TEST_REDIS_CLUSTER")
	s := open(t, "redis+cluster://"+addrs, redislease.Options{})
	if s.Topology() != redislease.Cluster {
		t.Fatalf("Topology = %s", s.Topology())
	}
	leasetest.Run(t, harness("redis+cluster://"+addrs, plain(t, strings.Split(addrs, ","), true)))
}

func TestSentinel(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS_SENTINEL")
	master := need(t, "LEADERRUN_TEST_REDIS_SENTINEL_MASTER")
	s := open(t, "redis+sentinel://"+addr+"/"+master+"/0", redislease.Options{CallTimeout: time.Second})
	if s.Topology() != redislease.Sentinel {
		t.Fatalf("Topology = %s", s.Topology())
	}
	name := "sentinel-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "s1", ID: lease.NewID(), TTL: 2 * time.Second})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	h, err := s.Status(ctxT(t), name)
	if err != nil || h == nil || h.Label != "s1" || h.Token != l.Info().Token || h.Remaining <= 0 {
		t.Fatalf("Status = %+v, %v", h, err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := l.Renew(ctxT(t)); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after release: %v; want ErrLost", err)
	}
}

// TestAcquireRetryIsIdempotent: the same ID asking again (its first answer
// lost) gets the same token and a restarted TTL, not ErrHeld.
func TestAcquireRetryIsIdempotent(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	s := open(t, "redis://"+addr, redislease.Options{})
	raw := plain(t, []string{addr}, false)
	req := lease.Request{Name: "retry-" + lease.NewID()[:8], Label: "a", ID: lease.NewID(), TTL: 2 * time.Second}
	l1, err := s.TryAcquire(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	l2, err := s.TryAcquire(ctxT(t), req)
	if err != nil {
		t.Fatalf("retry with the same ID: %v", err)
	}
	if l2.Info().Token != l1.Info().Token || !l2.Info().Since.Equal(l1.Info().Since) {
		t.Fatalf("retry Info %+v != first %+v", l2.Info(), l1.Info())
	}
	if pttl := raw.PTTL(ctxT(t), "leaderrun:{"+req.Name+"}").Val(); pttl < 1900*time.Millisecond {
		t.Fatalf("PTTL after the retry = %v; want the TTL restarted (~2s)", pttl)
	}
	// The record holds the token, so Status can show it.
	var h *lease.Holder
	if h, err = s.Status(ctxT(t), req.Name); err != nil || h.Token != l1.Info().Token || h.ID != "" {
		t.Fatalf("Status = %+v, %v; want token %d and no ID", h, err, l1.Info().Token)
	}
	if err := l2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestHeldErrorHasRemaining(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	s := open(t, "redis://"+addr, redislease.Options{})
	name := "held-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctxT(t))
	_, err = s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: 3 * time.Second})
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("got %v; want HeldError", err)
	}
	if he.By.Remaining <= 0 || he.By.Remaining > 3*time.Second || he.By.TTL != 3*time.Second || he.By.ID != "" {
		t.Fatalf("HeldError.By = %+v", he.By)
	}
}

func TestTTLBelowMinimum(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	s := open(t, "redis://"+addr, redislease.Options{})
	_, err := s.TryAcquire(ctxT(t), lease.Request{Name: "short", Label: "a", ID: lease.NewID(), TTL: 10 * time.Millisecond})
	if !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("got %v; want ErrConfig", err)
	}
}

// TestWaitWakesOnRelease: a clean release wakes a waiter through the
// channel long before the TTL would have run out.
func TestWaitWakesOnRelease(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	a := open(t, "redis://"+addr, redislease.Options{})
	b := open(t, "redis://"+addr, redislease.Options{})
	name := "wake-" + lease.NewID()[:8]
	const ttl = 8 * time.Second
	la, err := a.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ { // the second round reuses the subscription
		_, err = b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: ttl})
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
		time.Sleep(300 * time.Millisecond) // let the waiter subscribe and go to sleep
		released := time.Now()
		if err := la.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		select {
		case woke := <-done:
			t.Logf("round %d: waiter woke %v after the release", round, woke.Sub(released))
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: waiter still asleep 2s after the release (TTL %v)", round, ttl)
		}
		if la, err = a.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	_ = la.Release(ctxT(t))
}

// TestWaitFallsBackToPTTL: with the subscription killed, a waiter still
// wakes, by the abandoned lease's PTTL at the latest, or sooner when the
// subscription is back (a release while it was down went unnoticed, so the
// waiter re-checks then); and the subscription comes back for later waits.
func TestWaitFallsBackToPTTL(t *testing.T) {
	addr, _ := private(t)
	a := open(t, "redis://"+addr, redislease.Options{})
	b := open(t, "redis://"+addr, redislease.Options{})
	raw := plain(t, []string{addr}, false)
	name := "pttl-" + lease.NewID()[:8]
	channel := "leaderrun:{" + name + "}:released"
	const ttl = 1500 * time.Millisecond
	sent := time.Now()
	if _, err := a.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	_, err := b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: ttl})
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("got %v; want HeldError", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctxT(t), name, he) }()
	waitSubscribers(t, raw, channel, 1)
	if n := raw.ClientKillByFilter(ctxT(t), "TYPE", "pubsub").Val(); n < 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub killed %d clients", n)
	}
	select {
	case err := <-done:
		took := time.Since(sent)
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if took > ttl+time.Second {
			t.Fatalf("Wait returned %v after the acquire; want by the TTL %v at the latest", took, ttl)
		}
		t.Logf("waiter woke %v after the acquire (TTL %v)", took, ttl)
	case <-time.After(ttl + 3*time.Second):
		t.Fatal("waiter never woke after the subscription was killed")
	}
	waitSubscribers(t, raw, channel, 1) // re-subscribed in the background
}

func waitSubscribers(t *testing.T, raw redis.UniversalClient, channel string, want int64) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if raw.PubSubNumSub(ctxT(t), channel).Val()[channel] >= want {
			return
		}
	}
	t.Fatalf("no subscriber on %s", channel)
}

// TestFrozenServer: with the server stopped (SIGSTOP), Renew gives up within
// the call timeout and does not claim the lease is lost.
func TestFrozenServer(t *testing.T) {
	addr, pid := private(t)
	const callTimeout = 300 * time.Millisecond
	s := open(t, "redis://"+addr, redislease.Options{CallTimeout: callTimeout})
	name := "frozen-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	leasetest.Freeze(t, pid)
	const slack = 150 * time.Millisecond
	leasetest.FrozenRenew(t, l, callTimeout, 100*time.Millisecond, slack)
	start := time.Now()
	if _, err := s.Status(context.Background(), name); !errors.Is(err, lease.ErrUnavailable) || time.Since(start) > callTimeout+slack {
		t.Fatalf("Status against a frozen server: %v after %v", err, time.Since(start))
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if err := l.Renew(ctxT(t)); err != nil {
		t.Fatalf("Renew after SIGCONT: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestPasswordNeverInErrors: a server with requirepass refuses wrong
// passwords from the URL and from REDISCLI_AUTH with ErrConfig, and no
// message carries the password; the right one works.
func TestPasswordNeverInErrors(t *testing.T) {
	addr, _ := private(t)
	const good = "s3cret-Good-Pw"
	if err := plain(t, []string{addr}, false).ConfigSet(ctxT(t), "requirepass", good).Err(); err != nil {
		t.Fatal(err)
	}
	const bad = "wr0ng-Pass/w@rd"
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name   string
		url    string
		getenv func(string) string
		want   error
	}{
		{"URLPassword", "redis://:" + bad + "@" + addr + "/0", noEnv, lease.ErrConfig},
		{"URLUserPassword", "redis://default:" + bad + "@" + addr, noEnv, lease.ErrConfig},
		{"EnvPassword", "redis://" + addr, func(k string) string {
			if k == "REDISCLI_AUTH" {
				return bad
			}
			return ""
		}, lease.ErrConfig},
		{"NoPassword", "redis://" + addr, noEnv, lease.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redislease.Open(ctxT(t), tc.url, redislease.Options{CallTimeout: time.Second, Getenv: tc.getenv})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded with a wrong password")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v; want %v", err, tc.want)
			}
			for _, frag := range []string{bad, "wr0ng", "w@rd"} {
				if strings.Contains(err.Error(), frag) {
					t.Fatalf("error %q contains the password", err)
				}
			}
			// Written for people: the server, and how to give the password.
			msg := err.Error()
			if !strings.HasPrefix(msg, "Redis at "+addr) || !strings.Contains(msg, "REDISCLI_AUTH") ||
				!strings.Contains(msg, "redis://[USER]:PASSWORD@HOST") || strings.Contains(msg, "lease: ") || strings.Contains(msg, "redislease") {
				t.Fatalf("message %q: want it to name the server and how to give the password, without package chains", msg)
			}
			t.Logf("%v", err)
		})
	}
	// An unreachable server opens (a standby may start before Redis); its
	// calls say unavailable, without the password.
	u, err := redislease.Open(ctxT(t), "redis://:"+bad+"@127.0.0.1:1/0", redislease.Options{CallTimeout: time.Second, Getenv: noEnv})
	if err != nil {
		t.Fatalf("Open of an unreachable server: %v; want a store whose calls report unavailable", err)
	}
	_, err = u.TryAcquire(ctxT(t), lease.Request{Name: "pw", Label: "a", ID: lease.NewID(), TTL: time.Second})
	if !errors.Is(err, lease.ErrUnavailable) || strings.Contains(err.Error(), "wr0ng") {
		t.Fatalf("TryAcquire on an unreachable server: %v; want ErrUnavailable without the password", err)
	}
	if want := "cannot reach Redis at 127.0.0.1:1: connection refused"; err.Error() != want {
		t.Fatalf("message %q; want %q", err, want)
	}
	u.Close()
	s := open(t, "redis://:"+good+"@"+addr, redislease.Options{})
	if strings.Contains(s.String(), good) {
		t.Fatalf("String() = %q shows the password", s.String())
	}
	// A store whose server starts refusing it mid-run: still no password.
	l, err := s.TryAcquire(ctxT(t), lease.Request{Name: "pw", Label: "a", ID: lease.NewID(), TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctxT(t))
}

// TestCommonWordPasswordKeepsMessages: a password that is a common word
// ("pass", "Redis") is left out of messages structurally, never by
// replacing its text elsewhere: the words around it stay whole.
func TestCommonWordPasswordKeepsMessages(t *testing.T) {
	addr, _ := private(t)
	if err := plain(t, []string{addr}, false).ConfigSet(ctxT(t), "requirepass", "s3cret-Good-Pw").Err(); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	for _, pw := range []string{"pass", "Redis", "reach", "user"} {
		_, err := redislease.Open(ctxT(t), "redis://:"+pw+"@"+addr, redislease.Options{CallTimeout: time.Second, Getenv: noEnv})
		if !errors.Is(err, lease.ErrConfig) {
			t.Fatalf("password %q: Open: %v; want ErrConfig", pw, err)
		}
		if msg := err.Error(); strings.Contains(msg, "xxxxx") || !strings.HasPrefix(msg, "Redis at "+addr+" refused the user name or password (WRONGPASS invalid username-password pair") {
			t.Errorf("password %q: message %q; want the server's words whole", pw, msg)
		}
		u, err := redislease.Open(ctxT(t), "redis://:"+pw+"@127.0.0.1:1", redislease.Options{CallTimeout: time.Second, Getenv: noEnv})
		if err != nil {
			t.Fatal(err)
		}
		_, err = u.TryAcquire(ctxT(t), lease.Request{Name: "pw", Label: "a", ID: lease.NewID(), TTL: time.Second})
		u.Close()
		if want := "cannot reach Redis at 127.0.0.1:1: connection refused"; err == nil || err.Error() != want {
			t.Errorf("password %q: %v; want %q", pw, err, want)
		}
	}
}

func TestCandidatesSingle(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	leasetest.RunCandidates(t, harness("redis://"+addr+"/0", plain(t, []string{addr}, false)))
}

func TestCandidatesCluster(t *testing.T) {
	addrs := need(t, "LEADERRUN_TEST_REDIS_CLUSTER")
	leasetest.RunCandidates(t, harness("redis+cluster://"+addrs, plain(t, strings.Split(addrs, ","), true)))
}

// A heartbeat drops every lapsed standby, its record included, however many
// there are (the script deletes them in chunks), and the keys expire with
// the last standby.
func TestJoinPrunesLapsedStandbys(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	s := open(t, "redis://"+addr, redislease.Options{})
	raw := plain(t, []string{addr}, false)
	name := "prune-" + lease.NewID()[:8]
	ctx := ctxT(t)
	for range 600 {
		if _, err := s.Join(ctx, name, lease.Candidate{ID: lease.NewID(), Label: "brief", Since: time.Now()}, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	// Registrations of 1ms lapse on the server's clock; nothing announces it.
	time.Sleep(20 * time.Millisecond)
	live := lease.Candidate{ID: lease.NewID(), Label: "live", Since: time.Now()}
	if n, err := s.Join(ctx, name, live, time.Minute); err != nil || n != 1 {
		t.Fatalf("Join: %d live, %v; want 1", n, err)
	}
	if n := raw.HLen(ctx, "leaderrun:{"+name+"}:candidates:rec").Val(); n != 1 {
		t.Fatalf("%d standby records left; want 1", n)
	}
	if ttl := raw.PTTL(ctx, "leaderrun:{"+name+"}:candidates").Val(); ttl <= 0 || ttl > time.Minute+2*time.Second {
		t.Fatalf("candidates key PTTL %v; want about the live standby's expiry", ttl)
	}
}

// A connection slower to set up than the call timeout (a loaded server's
// first answer) is a wait, not a failure: Acquire sets it up within its
// wait (Connect), and a renewal, after the keeper's Connect, answers within
// the call timeout. Before set-up had a budget of its own, every attempt's
// new connection was cut short at the call timeout and the wait ended with
// the store unavailable.
func TestSlowSetupIsAWait(t *testing.T) {
	addr := need(t, "LEADERRUN_TEST_REDIS")
	const callTimeout = 150 * time.Millisecond
	proxy, accepted := leasetest.SlowSetup(t, addr, 4*callTimeout)
	s := open(t, "redis://"+proxy, redislease.Options{CallTimeout: callTimeout})
	ctx := ctxT(t)
	name := "slow-setup-" + lease.NewID()[:8]
	a, err := lease.Acquire(ctx, s, lease.Request{Name: name, Label: "me", TTL: 10 * time.Second},
		lease.AcquireOptions{Wait: 10 * time.Second, CallTimeout: callTimeout})
	if err != nil {
		t.Fatalf("Acquire with a set-up 4 times the call timeout: %v (%d connections)", err, accepted.Load())
	}
	// The acquisition's announcement may hold the pool's connection for a
	// moment: the keeper sets one up (Connect) before each renewal.
	c, ok := a.Lease.(lease.Connector)
	if !ok {
		t.Fatal("a Redis lease is no lease.Connector")
	}
	// As the keeper does: set-up, then the renewal, and a renewal that
	// timed out (the machine's load, or the announcement that took the
	// pool's connection meanwhile) tried again, each try after a set-up.
	for try := 0; try < 3; try++ {
		if err := c.Connect(ctx); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		err = a.Lease.Renew(rctx)
		cancel()
		if err == nil || !errors.Is(err, lease.ErrUnavailable) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Renew after Connect, three tries: %v", err)
	}
	// As the run does: set-up, then the release (a renewal's connection
	// that timed out was dropped, so the release may need a new one). A
	// try whose answer was lost may have released: the next finds the
	// lease gone.
	for try := 0; try < 3; try++ {
		if err = c.Connect(ctx); err != nil {
			t.Fatalf("Connect: %v", err)
		}
		err = a.Lease.Release(ctx)
		if try > 0 && errors.Is(err, lease.ErrNotHeld) {
			err = nil
		}
		if err == nil || !errors.Is(err, lease.ErrUnavailable) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Release after Connect, three tries: %v", err)
	}
}
