package bloblease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"

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

// credHint says how to give Azure credentials, for "access denied" and
// "could not sign in" messages.
const credHint = "credentials come from a SAS token in the URL (?sv=…&sig=…), " + envConnString + ", " + envKey +
	", " + envSAS + " or an Azure sign-in (az login, managed identity)"

// classify turns an SDK error into one of ours. gone, when non-nil, is the
// sentinel for Azure's "not your lease" answers (ErrLost or ErrNotHeld). The
// vendor error itself is not wrapped: only its status, code or network cause
// appear, with secrets removed. op appears only where it helps ("lease x was
// lost").
func (s *Store) classify(ctx context.Context, op string, err error, gone error) error {
	var re *azcore.ResponseError
	isResp := errors.As(err, &re)
	where := "Azure Blob Storage at " + s.where
	switch {
	case gone != nil && bloberror.HasCode(err, leaseGoneCodes...):
		return lease.NewError(fmt.Sprintf("%s no longer holds our lease (%s: %s)", where, op, re.ErrorCode), gone)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The call's deadline (the keeper's or Acquire's bound on one call)
		// passed: the store did not answer in time, which is an outage to
		// retry, not the caller giving up; a caller whose own deadline ended
		// sees its context done.
		return lease.NewError(fmt.Sprintf("no answer from %s in time (%s)", where, op), lease.ErrUnavailable, context.DeadlineExceeded)
	case ctx.Err() != nil:
		// The caller cancelled: not the store's fault.
		return lease.NewError(fmt.Sprintf("%s: %s: %v", where, op, context.Cause(ctx)), context.Cause(ctx), ctx.Err())
	case isResp && (re.StatusCode == 401 || re.StatusCode == 403):
		hint := "check the " + string(s.kind) + " (" + credHint + ")"
		if s.kind == credDefaultAzC {
			hint = "the signed-in identity needs the Storage Blob Data Contributor role on the container (" + credHint + ")"
		}
		return lease.NewError(fmt.Sprintf("%s denied access (HTTP %d %s): %s", where, re.StatusCode, re.ErrorCode, hint), lease.ErrConfig)
	case isResp && re.StatusCode == 400:
		return lease.NewError(fmt.Sprintf("%s refused the request (HTTP 400 %s)", where, re.ErrorCode), lease.ErrConfig)
	case isResp && (re.StatusCode == 408 || re.StatusCode == 429 || re.StatusCode >= 500):
		return lease.NewError(fmt.Sprintf("%s is not available (HTTP %d %s)", where, re.StatusCode, re.ErrorCode), lease.ErrUnavailable)
	case isResp:
		return lease.NewError(fmt.Sprintf("%s: %s: unexpected answer HTTP %d %s", where, op, re.StatusCode, re.ErrorCode))
	}
	var ce *credError
	if errors.As(err, &ce) {
		return lease.NewError(fmt.Sprintf("could not sign in to Azure with %s: %s; %s", s.kind, s.redact(storeerr.FirstLine(ce.Error())), credHint), lease.ErrConfig)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return lease.NewError(fmt.Sprintf("cannot reach %s: no such host %s: check the account name", where, dns.Name), lease.ErrConfig)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return lease.NewError(fmt.Sprintf("no answer from %s within %v", where, s.callTimeout), lease.ErrUnavailable, context.DeadlineExceeded)
	}
	return lease.NewError(fmt.Sprintf("cannot reach %s: %s", where, s.redact(netReason(err))), lease.ErrUnavailable)
}

// netReason is the root cause of a network error, without the request URL
// (*url.Error quotes it, SAS and all) and the operations around it.
func netReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the connection was closed"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	return storeerr.FirstLine(err.Error())
}

// clientErr reports a failure to build the client.
func (s *Store) clientErr(op string, err error) error {
	return storeerr.Config("Azure Blob Storage at %s: %s: %s", s.where, op, s.redact(storeerr.FirstLine(err.Error())))
}

// redact removes every known secret from a message that quotes foreign text.
func (s *Store) redact(msg string) string {
	return storeerr.Quote(msg, s.secrets, 4)
}
