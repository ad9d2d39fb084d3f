package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errClosed is returned by calls on a closed Store.
var errClosed = errors.New("the etcd store is closed")

// classify turns an etcd client error into one wrapping a lease sentinel, at
// the store's edge, so nothing above this package looks at etcd or gRPC
// errors:
//
//   - refused credentials and permissions → lease.ErrConfig;
//   - everything transient (network, timeouts, a cancelled context, no
//     leader, leader changed, too many requests, the server stopping or
//     unhealthy, no space left) → lease.ErrUnavailable;
//   - the store having been closed, and answers we do not know → a plain
//     error.
//
// where names the cluster ("etcd at 127.0.0.1:2379"), op what was being done.
// Context errors stay in the chain too, so errors.Is(err, context.Canceled)
// works. secrets are masked out of the text quoted from etcd and gRPC as a
// last line of defence (their messages carry addresses but should never
// carry a password); where is ours and holds none.
func classify(where, op string, err error, secrets []string) error {
	if err == nil {
		return nil
	}
	var done *lease.Error
	if errors.As(err, &done) {
		return err // classified already (logging in, see Store.do)
	}
	kind := kindOf(err)
	return storeerr.New(describe(where, op, err, kind, secrets), kind, err)
}

// describe writes the message for err; kind is what kindOf said. A
// server's answer or gRPC status is quoted through storeerr.Redact (neither
// echoes a credential), other client text through storeerr.Quote with
// secrets.
func describe(where, op string, err error, kind error, secrets []string) string {
	quote := func(s string) string { return storeerr.Quote(s, secrets, 1) }
	switch {
	case errors.Is(err, errClosed):
		return fmt.Sprintf("%s: %s: the store is closed", where, op)
	case errors.Is(err, context.Canceled):
		return fmt.Sprintf("%s: %s: cancelled", where, op)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer from %s in time", where)
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return fmt.Sprintf("%s refused the user name or password: give the right ones in the URL (etcd://USER:PASSWORD@HOST) or in %s=USER:PASSWORD", where, EnvUser)
	case errors.Is(err, rpctypes.ErrUserEmpty):
		return fmt.Sprintf("%s wants a user name and password: give them in the URL (etcd://USER:PASSWORD@HOST) or in %s=USER:PASSWORD", where, EnvUser)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Sprintf("%s: %s: permission denied: grant the etcd user readwrite on the key prefix (see docs/stores.md, section etcd, Permissions)", where, op)
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		if kind == lease.ErrUnavailable {
			return fmt.Sprintf("%s is not ready: %s", where, storeerr.Redact(ee.Error()))
		}
		return fmt.Sprintf("%s: %s: unexpected answer: %s", where, op, storeerr.Redact(ee.Error()))
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		switch st.Code() {
		case codes.DeadlineExceeded:
			return fmt.Sprintf("no answer from %s in time", where)
		case codes.Unauthenticated:
			return fmt.Sprintf("%s refused the credentials: %s", where, storeerr.Redact(storeerr.FirstLine(st.Message())))
		case codes.Unavailable:
			return fmt.Sprintf("cannot reach %s: %s", where, storeerr.Redact(storeerr.FirstLine(st.Message())))
		}
		return fmt.Sprintf("%s: %s: %s: %s", where, op, st.Code(), storeerr.Redact(storeerr.FirstLine(st.Message())))
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Sprintf("cannot reach %s: %s", where, errno.Error())
	}
	return fmt.Sprintf("%s: %s: %s", where, op, quote(storeerr.FirstLine(err.Error())))
}

// kindOf picks the lease sentinel for an etcd client error; nil means
// neither.
func kindOf(err error) error {
	if errors.Is(err, errClosed) {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return lease.ErrUnavailable
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		switch ee {
		case rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrPermissionDenied,
			rpctypes.ErrAuthOldRevision, rpctypes.ErrInvalidAuthMgmt, rpctypes.ErrRequestTooLarge,
			rpctypes.ErrLeaseTTLTooLarge:
			return lease.ErrConfig
		case rpctypes.ErrNoLeader, rpctypes.ErrNotLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrNotCapable,
			rpctypes.ErrStopped, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
			rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrUnhealthy,
			rpctypes.ErrTooManyRequests, rpctypes.ErrNoSpace, rpctypes.ErrInvalidAuthToken,
			rpctypes.ErrClusterVersionUnavailable:
			return lease.ErrUnavailable
		}
		return nil // a server answer we do not know: do not claim it is transient
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		switch st.Code() {
		case codes.Unauthenticated, codes.PermissionDenied:
			return lease.ErrConfig
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted,
			codes.ResourceExhausted, codes.Internal:
			return lease.ErrUnavailable
		}
		return nil
	}
	// Not a server answer: the network or the dialer. Retrying may help.
	return lease.ErrUnavailable
}
