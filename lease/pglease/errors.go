package pglease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// classify turns a pgx error into one wrapping a lease sentinel, at the
// store's edge, so nothing above this package looks at pgx errors:
//
//   - refused credentials (SQLSTATE class 28), a missing database (3D000),
//     missing privileges (42501), a table of another shape (class 42) and
//     TLS verification failures → lease.ErrConfig;
//   - everything transient (network, timeouts, a cancelled context, the
//     statement timeout 57014, the server shutting down or starting up
//     (57P01–57P03), a session ended for idling (57P05, 25P03), too many connections (class 53), a read-only standby
//     (25006), serialization failures and deadlocks (class 40), lock
//     timeouts (55P03)) → lease.ErrUnavailable;
//   - other server answers → a plain error (retrying is not known to help).
//
// Context errors stay in the chain too. secrets are masked out of the text
// quoted from pgx as a last line of defence (its messages name the user and
// the database, never the password); where is ours and holds none.
func classify(where, op string, err error, secrets []string) error {
	if err == nil {
		return nil
	}
	kind := kindOf(err)
	return storeerr.New(describe(where, op, err, kind, secrets), kind, err)
}

// describe writes the message for err; kind is what kindOf said. A
// server's message is quoted through storeerr.Redact (the server never
// echoes a password), free-form client text through mask with secrets.
func describe(where, op string, err error, kind error, secrets []string) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		what := fmt.Sprintf("%s (SQLSTATE %s)", storeerr.Redact(storeerr.FirstLine(pe.Message)), pe.Code)
		switch {
		case pe.Code == "28P01" || strings.HasPrefix(pe.Code, "28"):
			return fmt.Sprintf("%s refused the login: %s; give the right user and password in the URL (postgres://USER:PASSWORD@HOST/DB), PGPASSWORD or ~/.pgpass", where, what)
		case pe.Code == "3D000":
			return fmt.Sprintf("%s: %s; name an existing database in the URL's path", where, what)
		case pe.Code == "42501":
			return fmt.Sprintf("%s: %s: %s; the role lacks a privilege leaderrun needs (see docs/stores.md, section PostgreSQL)", where, op, what)
		case pe.Code == "57014":
			return fmt.Sprintf("no answer from %s in time: %s: the statement timed out", where, op)
		case kind == lease.ErrUnavailable:
			return fmt.Sprintf("%s is not ready: %s: %s", where, op, what)
		case kind == lease.ErrConfig:
			return fmt.Sprintf("%s: %s: %s", where, op, what)
		}
		return fmt.Sprintf("%s: %s: unexpected answer: %s", where, op, what)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Sprintf("%s: %s: cancelled", where, op)
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return fmt.Sprintf("no answer from %s in time (%s)", where, op)
	}
	if errors.Is(err, errClosed) {
		return fmt.Sprintf("%s: %s: the store is closed", where, op)
	}
	if kind == lease.ErrConfig { // TLS verification
		return fmt.Sprintf("cannot verify %s: %s (give the CA with ?sslrootcert=FILE)", where, reason(err, secrets))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("no answer from %s in time (%s)", where, op)
	}
	return fmt.Sprintf("cannot reach %s: %s", where, reason(err, secrets))
}

// reason is the root cause of a network or TLS error, without the addresses
// and connection settings pgx puts around it; free-form text goes through
// mask with secrets.
func reason(err error, secrets []string) string {
	if r := storeerr.NetReason(err); r != "" {
		return r
	}
	var rec tls.RecordHeaderError
	if errors.As(err, &rec) {
		return "the server does not speak TLS"
	}
	if errors.Is(err, errClosed) {
		return "the store is closed"
	}
	// pgconn's ConnectError text is "failed to connect to `user=… database=…`:
	// ADDR (HOST): REASON"; keep the last part.
	s := storeerr.FirstLine(err.Error())
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return mask(s, secrets)
}

// kindOf is the lease sentinel for err, or nil.
func kindOf(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		c := pe.Code
		switch {
		case strings.HasPrefix(c, "28"), c == "3D000", c == "42501":
			return lease.ErrConfig
		case c == "57014", c == "57P01", c == "57P02", c == "57P03", c == "57P04", c == "57P05", c == "25P03", c == "55P03", c == "25006",
			strings.HasPrefix(c, "08"), strings.HasPrefix(c, "53"), strings.HasPrefix(c, "40"), strings.HasPrefix(c, "58"):
			return lease.ErrUnavailable
		case strings.HasPrefix(c, "42"):
			return lease.ErrConfig // the table is not ours, or the schema is missing
		}
		return nil
	}
	if errors.Is(err, errClosed) {
		return nil
	}
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	var cerr x509.CertificateInvalidError
	if errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr) {
		return lease.ErrConfig
	}
	// The network, a timeout, a cancelled context, a broken connection:
	// retrying may help.
	return lease.ErrUnavailable
}

// errClosed is returned by calls on a closed Store.
var errClosed = errors.New("the PostgreSQL store is closed")
