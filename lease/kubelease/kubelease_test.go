package kubelease_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/kubelease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// ttl is the shortest lease the suite can use here: whole seconds, and
// room for a renewal on a loaded machine.
const ttl = 2 * time.Second

// storeURL is the URL of the test API server's default namespace, with the
// admin kubeconfig scripts/kubernetes.sh wrote.
func storeURL(t testing.TB) string {
	return "kubernetes://default?kubeconfig=" + leasetest.RequireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
}

func openStore(t testing.TB, raw string) *kubelease.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := kubelease.Open(ctx, raw, kubelease.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// admin is a client for the Leases of the default namespace, as kubectl
// would edit them.
func admin(t testing.TB) coordclient.LeaseInterface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", leasetest.RequireEnv(t, "LEADERRUN_TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1 // no client-side rate limit
	cc, err := coordclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cc.Leases("default")
}

func harness(t *testing.T) leasetest.Harness {
	raw := storeURL(t)
	adm := admin(t)
	return leasetest.Harness{
		Open: func(t *testing.T) lease.Store { return openStore(t, raw) },
		TTL:  ttl,
		Break: func(t *testing.T, _ lease.Store, name string) {
			if err := adm.Delete(context.Background(), kubelease.ObjectName(name), metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete the Lease of %s: %v", name, err)
			}
		},
		PutRunEntry: func(t *testing.T, name string, token uint64, value []byte) {
			putRunEntry(t, adm, name, token, value)
		},
	}
}

// putRunEntry writes value as the run annotation of token in name's
// history, as kubectl annotate would.
func putRunEntry(t *testing.T, adm coordclient.LeaseInterface, name string, token uint64, value []byte) {
	t.Helper()
	ctx := context.Background()
	o, err := adm.Get(ctx, kubelease.HistoryName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the history of %s: %v", name, err)
	}
	o.Annotations[fmt.Sprintf("leaderrun/run-%d", token)] = string(value)
	if _, err := adm.Update(ctx, o, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("annotate the history of %s: %v", name, err)
	}
}

func TestConformance(t *testing.T) { leasetest.Run(t, harness(t)) }

func TestCandidates(t *testing.T) { leasetest.RunCandidates(t, harness(t)) }

// The fencing token never goes back, also when the Lease object is deleted
// and re-created (its leaseTransitions restarts at 0): each token is above
// every revision before its acquisition.
func TestTokenAfterDeletion(t *testing.T) {
	s := openStore(t, storeURL(t))
	defer s.Close()
	adm := admin(t)
	ctx := context.Background()
	name := "token-after-deletion-" + lease.NewID()[:8]
	var last uint64
	for i := range 4 {
		l, err := s.TryAcquire(ctx, lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl})
		if err != nil {
			t.Fatalf("TryAcquire %d: %v", i, err)
		}
		if tok := l.Info().Token; tok <= last {
			t.Fatalf("acquisition %d: token %d <= previous %d", i, tok, last)
		}
		last = l.Info().Token
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := adm.Delete(ctx, kubelease.ObjectName(name), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A waiter judges expiry on its own clock, from when it first saw the
// record: a renewTime far in the past (edited with kubectl, or a holder
// whose wall clock is wrong) does not make the lease free, and a waiter
// that first sees a record late waits a full TTL from then.
func TestWaiterIgnoresRenewTime(t *testing.T) {
	a, b := openStore(t, storeURL(t)), openStore(t, storeURL(t))
	defer a.Close()
	defer b.Close()
	adm := admin(t)
	ctx := context.Background()
	name := "waiter-clock-" + lease.NewID()[:8]
	la, err := a.TryAcquire(ctx, lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	o, err := adm.Get(ctx, kubelease.ObjectName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	o.Spec.RenewTime, o.Spec.AcquireTime = &old, &old
	if _, err := adm.Update(ctx, o, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := time.Now()
	if _, err := b.TryAcquire(ctx, lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: ttl}); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("TryAcquire of a record renewed in 2000 = %v; want held", err)
	}
	for {
		lb, err := b.TryAcquire(ctx, lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: ttl})
		if err == nil {
			if took := time.Since(seen); took < ttl {
				t.Fatalf("taken %v after the waiter first saw the record; want a full TTL (%v)", took, ttl)
			}
			if lb.Info().Token <= la.Info().Token {
				t.Fatalf("token %d <= %d", lb.Info().Token, la.Info().Token)
			}
			_ = lb.Release(ctx)
			return
		}
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Fatal(err)
		}
		if err := b.Wait(ctx, name, he); err != nil {
			t.Fatal(err)
		}
	}
}

// Open refuses a user whose Role lacks a verb the store needs, with one
// line that names it and RBAC (lease.ErrConfig).
func TestOpenRefusesMissingVerb(t *testing.T) {
	limited := leasetest.RequireEnv(t, "LEADERRUN_TEST_KUBE_LIMITED_KUBECONFIG")
	_, err := kubelease.Open(context.Background(), "kubernetes://kube-public?kubeconfig="+limited, kubelease.Options{})
	if !errors.Is(err, lease.ErrConfig) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "update") || !strings.Contains(err.Error(), "RBAC") {
		t.Fatalf("Open as a user without permissions = %v; want ErrConfig, one line naming update and RBAC", err)
	}
}

// Credentials come from $KUBECONFIG when the URL names no kubeconfig, and a
// URL with an unknown parameter or a bad namespace is refused before any
// contact.
func TestURL(t *testing.T) {
	kc := leasetest.RequireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
	getenv := func(k string) string {
		if k == "KUBECONFIG" {
			return kc
		}
		return ""
	}
	s, err := kubelease.Open(context.Background(), "kubernetes://default", kubelease.Options{Getenv: getenv})
	if err != nil {
		t.Fatalf("Open with $KUBECONFIG: %v", err)
	}
	_ = s.Close()
	for _, raw := range []string{"kubernetes://Default", "kubernetes://default?ns=x", "kubernetes://default?context=nope&kubeconfig=" + kc} {
		if _, err := kubelease.Open(context.Background(), raw, kubelease.Options{Getenv: getenv}); !errors.Is(err, lease.ErrConfig) {
			t.Errorf("Open(%s) = %v; want ErrConfig", raw, err)
		}
	}
}

// The run history stays within what Kubernetes lets an object's
// annotations hold (256 KiB), whatever keep says: 120 runs of about 3 KiB
// each (the longest text fields a record may have) are all recorded, the
// oldest dropped to make room, the newest kept in order.
func TestHistoryBytesBounded(t *testing.T) {
	s := openStore(t, storeURL(t))
	defer s.Close()
	adm := admin(t)
	ctx := context.Background()
	name := "history-bytes-" + lease.NewID()[:8]
	long := func(c string) string { return strings.Repeat(c, 1000) }
	const n = 120
	start := time.Now().Add(-time.Hour)
	for tok := uint64(1); tok <= n; tok++ {
		r := lease.Run{Name: name, Label: long("h"), Token: tok, Start: start, End: start.Add(time.Second),
			Outcome: lease.OutcomeFailed, ExitCode: 1, Signal: long("s"), Version: long("v")}
		if err := s.RecordRun(ctx, r, lease.MaxHistoryKeep); err != nil {
			t.Fatalf("RecordRun %d: %v", tok, err)
		}
	}
	runs, err := s.Runs(ctx, name, lease.MaxHistoryKeep)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 || len(runs) >= n {
		t.Fatalf("%d runs kept of %d; want the newest that fit in 200 KiB", len(runs), n)
	}
	for i, r := range runs {
		if want := uint64(n - i); r.Token != want {
			t.Fatalf("run %d has token %d; want %d (the newest, in order)", i, r.Token, want)
		}
	}
	o, err := adm.Get(ctx, kubelease.HistoryName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range o.Annotations {
		size += len(k) + len(v)
	}
	if size > 256<<10 {
		t.Fatalf("the history's annotations hold %d bytes; Kubernetes allows 256 KiB", size)
	}
	t.Logf("%d of %d runs kept, %d bytes of annotations", len(runs), n, size)
}

// A plain acquisition's token is above every token the name's slots were
// given, also when slot 0's object was last written before another slot
// was taken: slot 0 taken with --slots 3, slot 1 taken after it, slot 0's
// holder gone without another write; once slot 0 expires, the lease taken
// without --slots (slot 0's object) must not get a token below slot 1's.
func TestTokenAboveOtherSlots(t *testing.T) {
	s := openStore(t, storeURL(t))
	defer s.Close()
	ctx := context.Background()
	name := "token-slots-" + lease.NewID()[:8]
	slot := func(k int) lease.Lease {
		t.Helper()
		l, err := s.TryAcquire(ctx, lease.Request{Name: lease.SlotName(name, k), Label: fmt.Sprint("s", k), ID: lease.NewID(), TTL: ttl, Slots: 3})
		if err != nil {
			t.Fatalf("TryAcquire slot %d: %v", k, err)
		}
		return l
	}
	slot(0) // abandoned: never renewed or released
	l1 := slot(1)
	defer func() { _ = l1.Release(ctx) }()
	for {
		l, err := s.TryAcquire(ctx, lease.Request{Name: name, Label: "plain", ID: lease.NewID(), TTL: ttl})
		if err == nil {
			if l.Info().Token <= l1.Info().Token {
				t.Fatalf("token %d of the plain lease <= token %d of slot 1, taken earlier", l.Info().Token, l1.Info().Token)
			}
			_ = l.Release(ctx)
			return
		}
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Fatal(err)
		}
		if err := s.Wait(ctx, name, he); err != nil {
			t.Fatal(err)
		}
	}
}

// A connection slower to set up than a call's try (a loaded API server's
// TLS handshake and first answer) is a wait, not a failure: Acquire sets it
// up within its wait (Connect, a GET of /version), and the calls use it.
// (Go's HTTP transport also finishes a dial that a timed-out call began and
// keeps the connection, so this holds even without Connect; it is the
// behaviour, across both, that the test holds.)
func TestSlowSetupIsAWait(t *testing.T) {
	kubeconfig := leasetest.RequireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	const callTimeout = 600 * time.Millisecond
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			t.Fatal(err)
		}
		proxy, _ := leasetest.SlowSetup(t, u.Host, 3*callTimeout)
		u.Host = proxy // 127.0.0.1 on another port: the certificate's IP still matches
		cl.Server = u.String()
	}
	slow := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, slow); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kubelease.Open(ctx, "kubernetes://default?kubeconfig="+slow, kubelease.Options{CallTimeout: callTimeout})
	if err != nil {
		t.Fatalf("Open through a slow set-up: %v", err)
	}
	defer s.Close()
	name := "slow-setup-" + lease.NewID()[:8]
	a, err := lease.Acquire(ctx, s, lease.Request{Name: name, Label: "me", ID: lease.NewID(), TTL: 15 * time.Second}, lease.AcquireOptions{Wait: 15 * time.Second, CallTimeout: callTimeout})
	if err != nil {
		t.Fatalf("Acquire with a set-up 3 times the call timeout: %v", err)
	}
	if err := a.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
