package kubelease

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// errClosed is the cause of a call on a closed Store.
var errClosed = errors.New("the Kubernetes store is closed")

// classify turns an error of client-go into a *lease.Error: one sentence
// for people, with the kind callers test for. verb is the RBAC verb the
// call needed (get, list, watch, create, update, delete), op what it was
// for. A conflict is never classified here: callers handle 409 first.
func (s *Store) classify(verb, op string, err error) error {
	if err == nil {
		return nil
	}
	var done *lease.Error
	if errors.As(err, &done) {
		return err
	}
	msg, kind := s.describe(verb, op, err)
	if kind == lease.ErrUnavailable {
		s.answered.Store(0) // the connection may be gone: Connect looks
	}
	return storeerr.New(msg, kind, err)
}

func (s *Store) describe(verb, op string, err error) (string, error) {
	where, ns := s.cfg.where, s.cfg.namespace
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	switch {
	case errors.Is(err, errClosed):
		return fmt.Sprintf("%s: %s: the store is closed", where, op), nil
	case errors.Is(err, context.Canceled):
		return fmt.Sprintf("%s: %s: cancelled", where, op), lease.ErrUnavailable
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return fmt.Sprintf("no answer from %s in time", where), lease.ErrUnavailable
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("%s forbids this user to %s leases in namespace %s (RBAC): grant the verbs get, list, watch, create, update and delete on leases.coordination.k8s.io in a Role (see docs/stores.md, section Kubernetes)", where, verb, ns), lease.ErrConfig
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("%s refused the credentials (401 Unauthorized): check the kubeconfig's user or the pod's service account token", where), lease.ErrConfig
	case apierrors.IsNotFound(err) && verb == "create":
		return fmt.Sprintf("%s has no namespace %s", where, ns), lease.ErrConfig
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return fmt.Sprintf("%s: %s: the API server refused the object: %s", where, op, storeerr.Redact(storeerr.FirstLine(err.Error()))), lease.ErrConfig
	case errors.As(err, &uerr), errors.As(err, &herr):
		return fmt.Sprintf("%s: its certificate does not verify: %s", where, storeerr.FirstLine(err.Error())), lease.ErrConfig
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		code := int(se.Status().Code)
		if code >= 500 || code == http.StatusTooManyRequests {
			return fmt.Sprintf("%s is not ready: %d %s", where, code, storeerr.Redact(storeerr.FirstLine(se.Status().Message))), lease.ErrUnavailable
		}
		return fmt.Sprintf("%s: %s: unexpected answer %d: %s", where, op, code, storeerr.Redact(storeerr.FirstLine(se.Status().Message))), nil
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, net.ErrClosed) {
		reason := storeerr.NetReason(err)
		if reason == "" {
			reason = storeerr.Quote(storeerr.FirstLine(nerr.Error()), s.cfg.secrets, 8)
		}
		return fmt.Sprintf("cannot reach %s: %s", where, reason), lease.ErrUnavailable
	}
	return fmt.Sprintf("%s: %s: %s", where, op, storeerr.Quote(storeerr.FirstLine(err.Error()), s.cfg.secrets, 8)), lease.ErrUnavailable
}
