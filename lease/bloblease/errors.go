package bloblease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/leaderrun/leaderrun/lease"
)

var osGetenv = os.Getenv

// leaseGoneCodes are Azure's answers meaning "this lease ID no longer holds
// the blob": lost for a renew, not held for a release. Azurite answers
// LeaseNotPresentWithBlobOperation where Azure says LeaseLost (Azurite#635).
var leaseGoneCodes = []bloberror.Code{
	bloberror.LeaseIDMismatchWithLeaseOperation,
	bloberror.LeaseIDMismatchWithBlobOperation,
	bloberror.LeaseLost,
	bloberror.LeaseNotPresentWithLeaseOperation,
	bloberror.LeaseNotPresentWithBlobOperation,
	bloberror.LeaseIsBrokenAndCannotBeRenewed,
	bloberror.LeaseIsBreakingAndCannotBeChanged,
	bloberror.LeaseAlreadyBroken,
	bloberror.LeaseIDMissing,
	bloberror.BlobNotFound,
	bloberror.ContainerNotFound,
}

// tokenCred marks errors from the token credential, so they can be told
// apart from the storage service's own answers.
type tokenCred struct{ azcore.TokenCredential }

type credError struct{ err error }

func (e *credError) Error() string { return e.err.Error() }
func (e *credError) Unwrap() error { return e.err }

func (c tokenCred) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.TokenCredential.GetToken(ctx, o)
	if err != nil && ctx.Err() == nil {
		err = &credError{err}
	}
	return tok, err
}

// classify turns an SDK error into one of ours. gone, when non-nil, is the
// sentinel for Azure's "not your lease" answers (ErrLost or ErrNotHeld). The
// vendor error itself is not wrapped: only its status, code or network cause
// appear, with secrets removed.
func (s *Store) classify(ctx context.Context, op string, err error, gone error) error {
	var re *azcore.ResponseError
	isResp := errors.As(err, &re)
	switch {
	case gone != nil && bloberror.HasCode(err, leaseGoneCodes...):
		return fmt.Errorf("%w: azblob: %s: %s", gone, op, re.ErrorCode)
	case ctx.Err() != nil:
		// The caller's own context ended: not the store's fault.
		return fmt.Errorf("azblob: %s: %w", op, context.Cause(ctx))
	case isResp && (re.StatusCode == 401 || re.StatusCode == 403):
		hint := "check the " + string(s.kind)
		if s.kind == credDefaultAzC {
			hint = "the signed-in identity needs the Storage Blob Data Contributor role on the container"
		}
		return fmt.Errorf("%w: azblob: %s: access denied by %s (HTTP %d %s); %s", lease.ErrConfig, op, s.where, re.StatusCode, re.ErrorCode, hint)
	case isResp && re.StatusCode == 400:
		return fmt.Errorf("%w: azblob: %s: request refused by %s (HTTP 400 %s)", lease.ErrConfig, op, s.where, re.ErrorCode)
	case isResp && (re.StatusCode == 408 || re.StatusCode == 429 || re.StatusCode >= 500):
		return fmt.Errorf("%w: azblob: %s: HTTP %d %s", lease.ErrUnavailable, op, re.StatusCode, re.ErrorCode)
	case isResp:
		return fmt.Errorf("azblob: %s: HTTP %d %s", op, re.StatusCode, re.ErrorCode)
	}
	var ce *credError
	if errors.As(err, &ce) {
		first, _, _ := strings.Cut(ce.Error(), "\n")
		return fmt.Errorf("%w: azblob: %s: could not sign in with %s: %s", lease.ErrConfig, op, s.kind, s.redact(first))
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return fmt.Errorf("%w: azblob: %s: no such host %s: check the account name", lease.ErrConfig, op, dns.Name)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: azblob: %s: no answer from %s within %v", lease.ErrUnavailable, op, s.where, s.callTimeout)
	}
	// A network error. *url.Error quotes the request URL, SAS and all; keep
	// only its cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%w: azblob: %s: %s", lease.ErrUnavailable, op, s.redact(err.Error()))
}

// configErr reports a failure to build the client.
func (s *Store) configErr(op string, err error) error {
	first, _, _ := strings.Cut(err.Error(), "\n")
	return fmt.Errorf("%w: azblob: %s: %s", lease.ErrConfig, op, s.redact(first))
}

// redact removes every known secret from a message that quotes foreign text.
func (s *Store) redact(msg string) string {
	for _, sec := range s.secrets {
		if len(sec) >= 4 {
			msg = strings.ReplaceAll(msg, sec, "xxxxx")
		}
	}
	return msg
}
