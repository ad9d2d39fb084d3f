package kubelease

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestClassify: the answers of the API server and the failures of the
// connection, as client-go returns them, sorted into lease kinds: 403 a
// configuration error naming the verb and RBAC, 401 refused credentials,
// 429 and 5xx and connection errors outages, a deadline an outage too.
func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	s := &Store{cfg: &config{where: "Kubernetes at https://127.0.0.1:6443", namespace: "jobs", secrets: []string{"s3cr3t-token-value"}}}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		name string
		err  error
		want error
		says string
	}{
		{"Forbidden", apierrors.NewForbidden(gr, "x", errors.New(`User "u" cannot update`)), lease.ErrConfig, "forbids this user to update leases in namespace jobs (RBAC)"},
		{"Unauthorized", apierrors.NewUnauthorized("Unauthorized"), lease.ErrConfig, "refused the credentials"},
		{"TooManyRequests", apierrors.NewTooManyRequests("slow down", 1), lease.ErrUnavailable, "not ready"},
		{"ServiceUnavailable", apierrors.NewServiceUnavailable("etcd down"), lease.ErrUnavailable, "not ready"},
		{"Timeout", apierrors.NewTimeoutError("slow", 1), lease.ErrUnavailable, "in time"},
		{"Refused", refused, lease.ErrUnavailable, "connection refused"},
		{"Deadline", context.DeadlineExceeded, lease.ErrUnavailable, "in time"},
		{"Invalid", apierrors.NewBadRequest("no"), lease.ErrConfig, "refused the object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.classify("update", "renew x", tc.err)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("classify(%v) = %v; want one line saying %q that wraps %v", tc.err, err, tc.says, tc.want)
			}
			for _, other := range []error{lease.ErrUnavailable, lease.ErrConfig} {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("classify(%v) = %v wraps %v too", tc.err, err, other)
				}
			}
		})
	}
}

// TestObjectName: a valid object name is kept (kubectl finds it); any other
// lease name maps to a valid one of its own.
func TestObjectName(t *testing.T) {
	if got := objName("billing-worker"); got != "billing-worker" {
		t.Errorf("objName(billing-worker) = %q", got)
	}
	seen := map[string]string{}
	for _, n := range []string{"Billing", "billing_", "a/b", "a.b/c", "A", strings.Repeat("x", 200), strings.Repeat("x", 201), "-x", "x."} {
		o := objName(n)
		if !dnsSubdomain(o) || len(o) > 211 {
			t.Errorf("objName(%q) = %q: not a valid object name of at most 211 bytes", n, o)
		}
		if prev, ok := seen[o]; ok {
			t.Errorf("objName(%q) = objName(%q) = %q", n, prev, o)
		}
		seen[o] = n
	}
}
