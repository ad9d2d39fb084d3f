package etcdlease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// checkTLS makes one TLS handshake with the first member that answers, so
// that a server certificate the client would refuse, or a server that
// demands a client certificate none was given for, is reported at once as a
// configuration error. (gRPC reports a failed handshake only as calls that
// never connect and run out of time, which leaderrun would take for an
// outage and wait through.) Members that cannot be reached are skipped; none
// reachable is not an error here.
func (s *Store) checkTLS(ctx context.Context) error {
	for _, ep := range s.cfg.endpoints {
		tc := s.cfg.tls.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(ep) // what gRPC checks the certificate against
		}
		asked := noClientCert(tc)
		d := tls.Dialer{Config: tc}
		conn, err := d.DialContext(ctx, "tcp", ep)
		if err == nil {
			err = refusedAfterHandshake(ctx, conn, *asked)
			_ = conn.Close()
			if err == nil {
				return nil
			}
		}
		var (
			unknownCA x509.UnknownAuthorityError
			hostErr   x509.HostnameError
			invalid   x509.CertificateInvalidError
			verify    *tls.CertificateVerificationError
		)
		switch {
		case errors.As(err, &unknownCA):
			return storeerr.Config("cannot verify %s: its certificate is signed by an unknown authority (give the CA with ?ca=FILE)", s.cfg.where)
		case errors.As(err, &hostErr):
			return storeerr.Config("cannot verify %s: %s (give the name on its certificate with ?servername=NAME)", s.cfg.where, hostErr.Error())
		case errors.As(err, &invalid):
			return storeerr.Config("cannot verify %s: %s", s.cfg.where, invalid.Error())
		case errors.As(err, &verify):
			return storeerr.Config("cannot verify %s: %s", s.cfg.where, storeerr.FirstLine(verify.Error()))
		case *asked:
			return storeerr.Config("%s demands a client certificate: give one with ?cert=FILE&key=FILE", s.cfg.where)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// noClientCert makes tc record, in the bool it returns, whether the server
// asked for a client certificate, when tc has none to give (it then sends
// none, as it would have).
func noClientCert(tc *tls.Config) *bool {
	asked := new(bool)
	if len(tc.Certificates) > 0 || tc.GetClientCertificate != nil {
		return asked
	}
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		*asked = true
		return &tls.Certificate{}, nil
	}
	return asked
}

// refusedAfterHandshake tells, when the server asked for a client
// certificate and got none, whether it then refused the connection. In TLS
// 1.3 the client's side of the handshake ends before the server has checked
// the client's certificate, so a refusal comes as an alert on the first
// read; a server that accepts the connection sends nothing until the client
// speaks, so the read waits until ctx's deadline (at most a call timeout,
// and only for a server that asks for certificates but does not require
// them). It returns nil when the server was not asked about, or accepted.
func refusedAfterHandshake(ctx context.Context, conn net.Conn, asked bool) error {
	if !asked {
		return nil
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(DefaultCallTimeout)
	}
	_ = conn.SetReadDeadline(dl)
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return err
}

// plainToTLS is what a Store without TLS learnt about whether its members
// speak TLS (see Store.classify).
type plainToTLS struct {
	answered atomic.Bool // some call has had an answer: the members speak plain gRPC

	mu     sync.Mutex
	probed bool // a member took a TCP connection and was asked
	tls    bool // ... and answered a TLS handshake
}

// seemsTLS tells, for a Store whose URL has no TLS and whose calls have
// never been answered, whether a member answers a TLS handshake: a plain
// client's calls to a TLS port only run out of time, which would read as an
// outage. The answer is remembered once a member took the connection.
// Nothing is sent over the probe but a ClientHello, so the server's
// certificate is not verified. The probe has a context of its own, bounded
// by the call timeout: it runs after a call failed, usually because its
// context ran out.
func (s *Store) seemsTLS() bool {
	p := &s.plain
	if s.cfg.tls != nil || p.answered.Load() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.probed {
		return p.tls
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
	defer cancel()
	for _, ep := range s.cfg.endpoints {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", ep)
		if err != nil {
			continue
		}
		tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a probe: nothing is sent over it
		asked := noClientCert(tc)
		tconn := tls.Client(conn, tc)
		err = tconn.HandshakeContext(ctx)
		_ = tconn.Close()
		p.probed, p.tls = true, err == nil || *asked
		if p.tls {
			return true
		}
	}
	return p.tls
}
