package etcdlease

import (
	"errors"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClassifyBackPressure: the server saying "no more" (too many requests,
// a gRPC resource limit, no space left) is an outage to wait through with
// back-off, never a configuration error (exit 125); a request etcd will
// never take is one. The errors are the values the client returns: it turns
// the server's gRPC status into the rpctypes error with rpctypes.Error.
func TestClassifyBackPressure(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"TooManyRequests", rpctypes.Error(rpctypes.ErrGRPCRequestTooManyRequests), lease.ErrUnavailable},
		{"NoSpace", rpctypes.Error(rpctypes.ErrGRPCNoSpace), lease.ErrUnavailable},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "grpc: the server is out of streams"), lease.ErrUnavailable},
		{"RequestTooLarge", rpctypes.Error(rpctypes.ErrGRPCRequestTooLarge), lease.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classify("etcd at 127.0.0.1:2379", "acquire x", tc.err, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("classify(%v) = %v; want it to wrap %v", tc.err, err, tc.want)
			}
			for _, other := range []error{lease.ErrUnavailable, lease.ErrConfig} {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("classify(%v) = %v wraps %v too", tc.err, err, other)
				}
			}
		})
	}
}
