package kubelease_test

import (
	"context"
	"fmt"
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
