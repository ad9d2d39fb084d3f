package etcdlease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// checkTLS makes one TLS handshake with the first member that answers, so
// that a server certificate the client would refuse is reported at once as a
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
		d := tls.Dialer{Config: tc}
		conn, err := d.DialContext(ctx, "tcp", ep)
		if err == nil {
			_ = conn.Close()
			return nil
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
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}
