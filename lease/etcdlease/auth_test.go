package etcdlease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestAuth: on an etcd with authentication on, the right user and password
// (from the URL or ETCDCTL_USER) work for every operation, including a
// waiter's watch; a wrong password is refused at Open with ErrConfig; a user
// without permission on the key prefix gets ErrConfig; no message ever
// carries a password.
func TestAuth(t *testing.T) {
	t.Parallel()
	env := private(t, "single")
	url := env["LEADERRUN_TEST_ETCD_URL"]
	host := strings.TrimPrefix(url, "etcd://")
	const (
		rootPW = "R00t-Secret-pw"
		userPW = "Us3r-Secret/p@ss"
		bad    = "wr0ng-Secret-pw"
	)
	enableAuth(t, url, rootPW, userPW)
	secretFree := func(t *testing.T, what string, err error) {
		t.Helper()
		for _, s := range []string{rootPW, userPW, bad, "Secret"} {
			if err != nil && strings.Contains(err.Error(), s) {
				t.Fatalf("%s: %q shows a password", what, err)
			}
		}
	}
	noEnv := func(string) string { return "" }
	envUser := func(v string) func(string) string {
		return func(k string) string {
			if k == etcdlease.EnvUser {
				return v
			}
			return ""
		}
	}

	t.Run("Works", func(t *testing.T) {
		for _, tc := range []struct {
			name, url string
			getenv    func(string) string
		}{
			{"URL", "etcd://job:Us3r-Secret%2Fp%40ss@" + host, noEnv},
			{"RawURL", "etcd://job:" + userPW + "@" + host, noEnv},
			{"ETCDCTL_USER", url, envUser("job:" + userPW)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := open(t, tc.url, etcdlease.Options{Getenv: tc.getenv})
				b := open(t, tc.url, etcdlease.Options{Getenv: tc.getenv})
				if strings.Contains(a.String(), "Secret") {
					t.Fatalf("String() = %q shows the password", a.String())
				}
				name := "auth-" + lease.NewID()[:8]
				l, err := a.TryAcquire(ctxT(t), req(name, "a", 10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Renew(ctxT(t)); err != nil {
					t.Fatalf("Renew: %v", err)
				}
				_, err = b.TryAcquire(ctxT(t), req(name, "b", 10*time.Second))
				var he *lease.HeldError
				if !errors.As(err, &he) {
					t.Fatalf("TryAcquire: %v; want HeldError", err)
				}
				if h, err := b.Status(ctxT(t), name); err != nil || h == nil || h.Label != "a" || h.Remaining <= 0 {
					t.Fatalf("Status = %+v, %v", h, err)
				}
				done := make(chan error, 1)
				go func() { done <- b.Wait(ctxT(t), name, he) }()
				if err := l.Release(ctxT(t)); err != nil {
					t.Fatalf("Release: %v", err)
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("Wait: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the waiter did not wake on the release (TTL 10s)")
				}
			})
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		for _, tc := range []struct {
			name, url string
			getenv    func(string) string
		}{
			{"URL", "etcd://job:" + bad + "@" + host, noEnv},
			{"ETCDCTL_USER", url, envUser("job:" + bad)},
			{"UnknownUser", "etcd://nobody:" + bad + "@" + host, noEnv},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, err := etcdlease.Open(ctxT(t), tc.url, etcdlease.Options{Getenv: tc.getenv})
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded with a wrong password")
				}
				secretFree(t, "Open", err)
				if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "etcd at "+host) || !strings.Contains(err.Error(), "ETCDCTL_USER") {
					t.Fatalf("Open: %v; want ErrConfig naming the server and how to give the password", err)
				}
				t.Log(err)
			})
		}
	})

	// A wrong password that is a common word is left out structurally: the
	// words of the message stay whole.
	t.Run("CommonWordPassword", func(t *testing.T) {
		for _, pw := range []string{"pass", "etcd", "reach"} {
			_, err := etcdlease.Open(ctxT(t), "etcd://job:"+pw+"@"+host, etcdlease.Options{Getenv: noEnv})
			want := "etcd at " + host + " refused the user name or password: give the right ones in the URL (etcd://USER:PASSWORD@HOST) or in ETCDCTL_USER=USER:PASSWORD"
			if !errors.Is(err, lease.ErrConfig) || err.Error() != want {
				t.Errorf("password %q: Open: %v; want %q", pw, err, want)
			}
		}
	})

	t.Run("NoPermission", func(t *testing.T) {
		s := open(t, "etcd://job:"+userPW+"@"+host+"/elsewhere", etcdlease.Options{})
		_, err := s.TryAcquire(ctxT(t), req("denied", "a", 5*time.Second))
		secretFree(t, "TryAcquire", err)
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("TryAcquire outside the granted prefix: %v; want ErrConfig, permission denied", err)
		}
		t.Log(err)
	})

	t.Run("NoCredentials", func(t *testing.T) {
		s := open(t, url, etcdlease.Options{Getenv: noEnv})
		_, err := s.TryAcquire(ctxT(t), req("anon", "a", 5*time.Second))
		if !errors.Is(err, lease.ErrConfig) {
			t.Fatalf("TryAcquire without credentials: %v; want ErrConfig", err)
		}
		t.Log(err)
	})
}

// enableAuth turns authentication on: root (role root) and job (read and
// write on leaderrun/).
func enableAuth(t *testing.T, url, rootPW, userPW string) {
	t.Helper()
	raw := plain(t, url)
	ctx := ctxT(t)
	for _, step := range []func() error{
		func() error { _, err := raw.UserAdd(ctx, "root", rootPW); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := raw.RoleAdd(ctx, "jobs"); return err },
		func() error {
			_, err := raw.RoleGrantPermission(ctx, "jobs", "leaderrun/", clientv3.GetPrefixRangeEnd("leaderrun/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := raw.UserAdd(ctx, "job", userPW); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "job", "jobs"); return err },
		func() error { _, err := raw.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up auth: %v", err)
		}
	}
}

// TestAuthTokenExpires: etcd's simple auth tokens expire (here after 1 s);
// a holder whose token expired between renewals still renews (the client
// fetches a new token), and so do its release and a waiter.
func TestAuthTokenExpires(t *testing.T) {
	t.Parallel()
	env := private(t, "single", "--auth-token-ttl=1")
	url := env["LEADERRUN_TEST_ETCD_URL"]
	enableAuth(t, url, "R00t-pw", "J0b-pw")
	u := "etcd://job:J0b-pw@" + strings.TrimPrefix(url, "etcd://")
	s := open(t, u, etcdlease.Options{})
	name := "token-" + lease.NewID()[:8]
	l, err := s.TryAcquire(ctxT(t), req(name, "a", 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		time.Sleep(2500 * time.Millisecond) // the token's expiry is what is tested
		if err := l.Renew(ctxT(t)); err != nil {
			t.Fatalf("Renew %d with an expired token: %v", i, err)
		}
	}
	time.Sleep(2500 * time.Millisecond)
	if h, err := s.Status(ctxT(t), name); err != nil || h == nil {
		t.Fatalf("Status with an expired token: %+v, %v", h, err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("Release with an expired token: %v", err)
	}
}
