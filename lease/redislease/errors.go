package redislease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/redis/go-redis/v9"
)

// classify turns a go-redis error into one wrapping a lease sentinel, at the
// store's edge, so nothing above this package looks at go-redis errors:
//
//   - credentials and permissions (NOAUTH, WRONGPASS, NOPERM), TLS
//     verification failures and scripts Redis refuses to run → lease.ErrConfig;
//   - everything transient (network, timeouts, a cancelled context, LOADING,
//     READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, BUSY, OOM, max clients,
//     pool exhaustion) → lease.ErrUnavailable;
//   - the store having been closed → a plain error.
//
// Context errors stay in the chain too, so errors.Is(err, context.Canceled)
// works. secrets are masked out of the message as a last line of defence;
// go-redis messages carry addresses but should never carry a password.
func classify(op string, err error, secrets []string) error {
	if err == nil {
		return nil
	}
	kind := kindOf(err)
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	var ctxErr error
	switch {
	case errors.Is(err, context.Canceled):
		ctxErr = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		ctxErr = context.DeadlineExceeded
	}
	switch {
	case kind == nil:
		return fmt.Errorf("redislease: %s: %s", op, msg)
	case ctxErr != nil && msg == ctxErr.Error():
		return fmt.Errorf("redislease: %s: %w: %w", op, kind, ctxErr)
	case ctxErr != nil:
		return fmt.Errorf("redislease: %s: %w: %s (%w)", op, kind, msg, ctxErr)
	default:
		return fmt.Errorf("redislease: %s: %w: %s", op, kind, msg)
	}
}

// kindOf picks the lease sentinel for a go-redis error; nil means neither.
func kindOf(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return lease.ErrUnavailable
	}
	if redis.IsAuthError(err) || redis.IsPermissionError(err) {
		return lease.ErrConfig
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid) || errors.As(err, &verify) {
		return lease.ErrConfig
	}
	if redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) || redis.IsMaxClientsError(err) ||
		redis.IsOOMError(err) || redis.IsNoReplicasError(err) {
		return lease.ErrUnavailable
	}
	if _, ok := redis.IsMovedError(err); ok {
		return lease.ErrUnavailable // slots moving; the next call follows them
	}
	if _, ok := redis.IsAskError(err); ok {
		return lease.ErrUnavailable
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		s := rerr.Error()
		switch {
		case strings.HasPrefix(s, "BUSY"), strings.HasPrefix(s, "MISCONF"):
			return lease.ErrUnavailable
		case strings.Contains(s, "AUTH"), strings.Contains(s, "password"):
			// Older servers: "ERR invalid password", "ERR AUTH <password> called
			// without any password configured".
			return lease.ErrConfig
		case strings.HasPrefix(s, "ERR unknown command"), strings.HasPrefix(s, "NOSCRIPT"),
			strings.HasPrefix(s, "WRONGTYPE"), strings.Contains(s, "Error running script"):
			return lease.ErrConfig // the server cannot run our scripts, or the key is not ours
		}
		return nil // a server answer we do not know: do not claim it is transient
	}
	// Not a server answer: the network, a timeout, the pool, Sentinel saying
	// no master is known. Retrying may help.
	return lease.ErrUnavailable
}
