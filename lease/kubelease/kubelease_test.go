package kubelease_test

import (
	"context"
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
	}
}

func TestConformance(t *testing.T) { leasetest.Run(t, harness(t)) }
