package redislease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
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
// where names the server ("Redis at 127.0.0.1:6379"), op what was being done
// (it appears only for answers we do not know). Context errors stay in the
// chain too, so errors.Is(err, context.Canceled) works. secrets are masked
// out of the text quoted from go-redis as a last line of defence (its
// messages carry addresses but should never carry a password); where is
// ours and holds none.
func classify(where, op string, err error, secrets []string) error {
	if err == nil {
		return nil
	}
	kind := kindOf(err)
	return storeerr.New(describe(where, op, err, kind, secrets), kind, err)
}

// describe writes the message for err; kind is what kindOf said. A
// server's answer is quoted through storeerr.Redact (Redis never echoes a
// credential), free-form client text through storeerr.Quote with secrets.
func describe(where, op string, err error, kind error, secrets []string) string {
	quote := func(s string) string { return storeerr.Quote(s, secrets, 1) }
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Sprintf("%s: %s: the store is closed", where, op)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Sprintf("%s: %s: cancelled", where, op)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer from %s in time", where)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		s := rerr.Error()
		code, _, _ := strings.Cut(s, " ")
		line := storeerr.Redact(storeerr.FirstLine(s))
		switch {
		case code == "NOAUTH":
			return fmt.Sprintf("%s wants a password: give it in the URL (redis://[USER]:PASSWORD@HOST) or in %s", where, EnvPassword)
		case code == "WRONGPASS" || strings.Contains(s, "invalid password") || strings.Contains(s, "AUTH") && strings.Contains(s, "without any password"):
			return fmt.Sprintf("%s refused the user name or password (%s): give the right one in the URL (redis://[USER]:PASSWORD@HOST) or in %s", where, line, EnvPassword)
		case code == "NOPERM":
			return fmt.Sprintf("%s: the Redis user lacks a permission leaderrun needs (%s); see the ACL in docs/stores.md, section Redis", where, line)
		case kind == lease.ErrUnavailable:
			return fmt.Sprintf("%s is not ready: %s", where, line)
		case kind == lease.ErrConfig:
			return fmt.Sprintf("%s cannot run leaderrun's scripts: %s", where, line)
		}
		return fmt.Sprintf("%s: %s: unexpected answer: %s", where, op, line)
	}
	if kind == lease.ErrConfig { // TLS verification
		return fmt.Sprintf("cannot verify %s: %s (give the CA with ?ca=FILE)", where, reason(err, quote))
	}
	if errors.Is(err, redis.ErrPoolTimeout) {
		return fmt.Sprintf("no free connection to %s in time", where)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("no answer from %s in time", where)
	}
	return fmt.Sprintf("cannot reach %s: %s", where, reason(err, quote))
}

// reason is the root cause of a network or TLS error, without the
// addresses and operations go-redis and net put around it; free-form text
// goes through quote.
func reason(err error, quote func(string) string) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the connection was closed"
	}
	if r := storeerr.NetReason(err); r != "" {
		return r
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return quote(storeerr.FirstLine(op.Err.Error()))
	}
	return quote(storeerr.FirstLine(err.Error()))
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
