package kubelease_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
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

// TestCredentialsOrder: credentials are found as docs/stores.md says, on
// the real API server. The test plays a pod (a service-account mount with
// the admin's token, KUBERNETES_SERVICE_HOST and _PORT) and writes
// kubeconfigs with two contexts, admin@test and limited@test (the user
// without permissions), so each case shows which source was used: the
// admin's is accepted, the limited user's refused (RBAC, exit 125's
// lease.ErrConfig). Order: the pod's service account unless the URL names
// a context or a kubeconfig, then $KUBECONFIG, then ~/.kube/config; the
// URL's context or the current one; the namespace from the URL, else the
// pod's, else the context's.
func TestCredentialsOrder(t *testing.T) {
	adminKC := leasetest.RequireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
	limitedKC := leasetest.RequireEnv(t, "LEADERRUN_TEST_KUBE_LIMITED_KUBECONFIG")
	admin, err := clientcmd.LoadFromFile(adminKC)
	if err != nil {
		t.Fatal(err)
	}
	limited, err := clientcmd.LoadFromFile(limitedKC)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	adminToken := admin.AuthInfos[admin.Contexts[admin.CurrentContext].AuthInfo].Token
	limitedToken := limited.AuthInfos[limited.Contexts[limited.CurrentContext].AuthInfo].Token
	server, err := url.Parse(cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(cluster.CertificateAuthority)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(path, text string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// kubeconfig writes a file with both users' contexts; current names the
	// current one; the admin's context has namespace kube-system.
	kubeconfig := func(file, current string) string {
		return write(filepath.Join(dir, file), fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {token: %q}
- name: limited
  user: {token: %q}
contexts:
- name: admin@test
  context: {cluster: test, user: admin, namespace: kube-system}
- name: limited@test
  context: {cluster: test, user: limited, namespace: kube-public}
current-context: %s
`, cluster.Server, cluster.CertificateAuthority, adminToken, limitedToken, current))
	}
	adminCurrent := kubeconfig("admin-current", "admin@test")
	limitedCurrent := kubeconfig("limited-current", "limited@test")
	// The pod: its service account's token is the admin's; its namespace
	// kube-public.
	pod := filepath.Join(dir, "serviceaccount")
	write(filepath.Join(pod, "token"), adminToken)
	write(filepath.Join(pod, "ca.crt"), string(ca))
	write(filepath.Join(pod, "namespace"), "kube-public")
	noPod := filepath.Join(dir, "no-serviceaccount")
	homeAdmin := filepath.Join(dir, "home-admin")
	write(filepath.Join(homeAdmin, ".kube", "config"), readFile(t, adminCurrent))
	homeEmpty := filepath.Join(dir, "home-empty")
	inPod := map[string]string{"KUBERNETES_SERVICE_HOST": server.Hostname(), "KUBERNETES_SERVICE_PORT": server.Port()}

	for _, tc := range []struct {
		name   string
		sa     string            // the service-account mount
		env    map[string]string // besides inPod when sa is pod
		url    string
		wantNS string // "": refused with RBAC; "none": no credentials at all
	}{
		{"PodFirst", pod, map[string]string{"KUBECONFIG": limitedCurrent, "HOME": homeAdmin}, "kubernetes://", "kube-public"},
		{"PodNamespaceFromURL", pod, map[string]string{"KUBECONFIG": limitedCurrent}, "kubernetes://default", "default"},
		{"URLKubeconfigOverPod", pod, map[string]string{"KUBECONFIG": adminCurrent}, "kubernetes://kube-public?kubeconfig=" + limitedCurrent, ""},
		{"URLContextOverPod", pod, map[string]string{"KUBECONFIG": adminCurrent}, "kubernetes://kube-public?context=limited@test", ""},
		{"NoTokenMountedKUBECONFIG", noPod, map[string]string{"KUBECONFIG": adminCurrent, "HOME": homeEmpty}, "kubernetes://", "kube-system"},
		{"KUBECONFIGCurrentContext", "", map[string]string{"KUBECONFIG": limitedCurrent + string(os.PathListSeparator) + adminCurrent}, "kubernetes://kube-public", ""},
		{"KUBECONFIGNamedContext", "", map[string]string{"KUBECONFIG": limitedCurrent}, "kubernetes://?context=admin@test", "kube-system"},
		{"KUBECONFIGBeforeHome", "", map[string]string{"KUBECONFIG": limitedCurrent, "HOME": homeAdmin}, "kubernetes://kube-public", ""},
		{"HomeKubeConfig", "", map[string]string{"HOME": homeAdmin}, "kubernetes://default", "default"},
		{"Nothing", "", map[string]string{"HOME": homeEmpty}, "kubernetes://default", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			if tc.sa != "" {
				kubelease.SetServiceAccountDir(t, tc.sa)
				for k, v := range inPod {
					env[k] = v
				}
			} else {
				kubelease.SetServiceAccountDir(t, noPod)
			}
			for k, v := range tc.env {
				env[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := kubelease.Open(ctx, tc.url, kubelease.Options{Getenv: func(k string) string { return env[k] }})
			switch tc.wantNS {
			case "":
				if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "RBAC") {
					t.Fatalf("Open = %v; want the limited user's credentials, refused (RBAC)", err)
				}
				return
			case "none":
				if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "no usable Kubernetes credentials") || strings.Contains(err.Error(), "KUBERNETES_MASTER") {
					t.Fatalf("Open = %v; want no usable credentials", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open = %v; want the admin's credentials", err)
			}
			defer s.Close()
			name := "creds-" + strings.ToLower(tc.name) + "-" + lease.NewID()[:8]
			l, err := s.TryAcquire(ctx, lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Release(context.Background()) }()
			if _, err := leasesIn(t, adminKC, tc.wantNS).Get(ctx, kubelease.ObjectName(name), metav1.GetOptions{}); err != nil {
				t.Fatalf("the Lease is not in namespace %s: %v", tc.wantNS, err)
			}
		})
	}
}

// leasesIn is a client for the Leases of namespace ns, as the admin.
func leasesIn(t *testing.T, kubeconfig, ns string) coordclient.LeaseInterface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := coordclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cc.Leases(ns)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
