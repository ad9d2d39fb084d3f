// Package storeerr holds the error-writing pieces the network stores
// (redislease, etcdlease, pglease, bloblease) share: every error they return is a
// *lease.Error whose message is one sentence with secrets masked out, and
// which is the lease sentinel and context error it stands for.
//
// It imports net and crypto/x509, so the file store and the base program
// must not import it.
package storeerr

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/leaderrun/leaderrun/lease"
)

// Config returns a store URL or option problem: a *lease.Error that wraps
// lease.ErrConfig, with the message format and args write.
func Config(format string, args ...any) error {
	return lease.NewError(fmt.Sprintf(format, args...), lease.ErrConfig)
}

// New returns a *lease.Error with message msg that is kind (a lease
// sentinel, or nil for neither) and, when cause is or wraps
// context.Canceled or context.DeadlineExceeded, that context error too, so
// that errors.Is(err, context.Canceled) works on the result while the vendor
// error cause stays out of the chain.
func New(msg string, kind, cause error) error {
	var ctxErr error
	switch {
	case errors.Is(cause, context.Canceled):
		ctxErr = context.Canceled
	case errors.Is(cause, context.DeadlineExceeded):
		ctxErr = context.DeadlineExceeded
	}
	return lease.NewError(msg, kind, ctxErr)
}

// Mask replaces every secret of at least minLen bytes (and at least one) in
// s with "xxxxx": the last line of defence against a client library that
// puts a password in a message.
func Mask(s string, secrets []string, minLen int) string {
	minLen = max(minLen, 1)
	for _, x := range secrets {
		if len(x) >= minLen {
			s = strings.ReplaceAll(s, x, "xxxxx")
		}
	}
	return s
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// NetReason is the root cause of a network or TLS certificate error without
// the addresses and operations around it: the errno ("connection refused"),
// the DNS failure, or the certificate problem. It is "" when err is none of
// these.
func NetReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsNotFound {
			return "the host name " + dns.Name + " does not resolve (no such host: a typo, or a name this host's DNS does not know)"
		}
		return dns.Err
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknownCA):
		return "certificate signed by an unknown authority"
	case errors.As(err, &hostErr):
		return hostErr.Error()
	case errors.As(err, &invalid):
		return invalid.Error()
	}
	return ""
}
