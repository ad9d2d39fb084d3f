package etcdlease

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Authentication is done here rather than by the client. The client, given
// a user and password, refreshes an expired token by calling Authenticate
// with the expired token still attached; etcd 3.4 servers (Debian's) refuse
// that as "invalid auth token", which the client answers by refreshing
// again: every call then spins until its deadline, and a holder whose token
// expired (etcd's simple tokens last 5 minutes unused) could never renew. So
// the client gets no credentials; the store logs in without a token, puts
// the token on each call itself, and logs in again once when etcd says the
// token is no longer valid.

// do runs f with the client and the current token in ctx. When etcd refuses
// the token, it logs in again and runs f once more. Errors from f come back
// as they are (the caller classifies them); errors of the client's creation
// and of logging in come back classified.
func (s *Store) do(ctx context.Context, f func(ctx context.Context, cli *clientv3.Client) error) error {
	cli, tok, err := s.session(ctx)
	if err != nil {
		return err
	}
	err = f(withToken(ctx, tok), cli)
	if err == nil {
		s.plain.answered.Store(true)
	}
	if s.cfg.user == "" || !staleToken(err) {
		return err
	}
	if tok, err = s.login(ctx, cli, tok); err != nil {
		return err
	}
	return f(withToken(ctx, tok), cli)
}

// session returns the client, creating it on first use, and the current
// token, logging in first when there is none yet. A cluster that has never
// answered and whose every endpoint refuses connections is reported at once
// (see refused).
func (s *Store) session(ctx context.Context) (*clientv3.Client, string, error) {
	if err := s.refused(ctx); err != nil {
		return nil, "", s.classify("connect", err)
	}
	cli, err := s.client(ctx)
	if err != nil || s.cfg.user == "" {
		return cli, "", err
	}
	s.tokMu.Lock()
	tok, in := s.token, s.loggedIn
	s.tokMu.Unlock()
	if in {
		return cli, tok, nil
	}
	tok, err = s.login(ctx, cli, tok)
	return cli, tok, err
}

// currentToken returns the current token ("" without authentication).
func (s *Store) currentToken() string {
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	return s.token
}

// login authenticates with the URL's user and password, unless another call
// already replaced the stale token, and returns the new token.
func (s *Store) login(ctx context.Context, cli *clientv3.Client, stale string) (string, error) {
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	if s.loggedIn && s.token != stale {
		return s.token, nil
	}
	resp, err := pb.NewAuthClient(cli.ActiveConnection()).Authenticate(ctx,
		&pb.AuthenticateRequest{Name: s.cfg.user, Password: s.cfg.pass}, grpc.WaitForReady(true))
	if err != nil {
		err = clientv3.ContextError(ctx, err)
		if !errors.Is(err, rpctypes.ErrAuthNotEnabled) {
			return "", s.classify("log in", err)
		}
		resp = &pb.AuthenticateResponse{} // etcd without authentication: no token
	}
	s.token, s.loggedIn = resp.Token, true
	return s.token, nil
}

// withToken puts tok on ctx the way the client would.
func withToken(ctx context.Context, tok string) context.Context {
	if tok == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tok)
}

// staleToken reports an answer that means "log in again".
func staleToken(err error) bool {
	if err == nil {
		return false
	}
	err = rpctypes.Error(err)
	return errors.Is(err, rpctypes.ErrInvalidAuthToken) || errors.Is(err, rpctypes.ErrUserEmpty) ||
		errors.Is(err, rpctypes.ErrAuthOldRevision)
}
