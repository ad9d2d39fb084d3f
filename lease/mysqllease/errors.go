package mysqllease

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// Server error numbers this package tells apart (MySQL's and MariaDB's
// are the same for these).
const (
	erAccessDenied     = 1045 // login refused
	erDBAccessDenied   = 1044
	erBadDB            = 1049
	erNoSuchTable      = 1146
	erTableAccess      = 1142 // SELECT/INSERT/CREATE … command denied
	erColumnAccess     = 1143
	erSpecificAccess   = 1227
	erTooManyConns     = 1040 // max_connections
	erTooManyUserConns = 1203 // max_user_connections
	erUserLimitReached = 1226 // an account's MAX_USER_CONNECTIONS and other resource limits
	erLockWaitTimeout  = 1205
	erDeadlock         = 1213
	erServerShutdown   = 1053
	erQueryInterrupted = 1317
	erConnKilled       = 1927 // MariaDB
	erStatementTimeout = 1969 // MariaDB max_statement_time
	erExecutionTimeout = 3024 // MySQL max_execution_time
	erReadOnly         = 1290 // --read-only (and other server options)
	erReadOnlyTx       = 1792
	erSuperReadOnly    = 1836
	erUnknownColumn    = 1054
	erAccessDeniedNoPw = 1698
)

// classify turns a driver error into one wrapping a lease sentinel, at the
// store's edge:
//
//   - a refused login (1045, 1698), a missing database (1049), missing
//     privileges (1044, 1142, 1143, 1227), a table of another shape
//     (1054), TLS verification failures, the server refusing TLS or an
//     authentication method the driver will not use → lease.ErrConfig;
//   - everything transient (network, timeouts, a cancelled context, too
//     many connections 1040/1203/1226, lock wait timeouts and deadlocks,
//     the server shutting down, a killed or timed-out statement, a
//     read-only server) → lease.ErrUnavailable;
//   - other server answers → a plain error.
//
// The server's text is quoted through storeerr.Redact (it names the user
// and host, never the password); where is ours and holds none.
func classify(where, op string, err error, secrets []string) error {
	if err == nil {
		return nil
	}
	kind := kindOf(err)
	return storeerr.New(describe(where, op, err, kind, secrets), kind, err)
}

func describe(where, op string, err, kind error, secrets []string) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		what := fmt.Sprintf("%s (error %d)", storeerr.Quote(storeerr.FirstLine(me.Message), secrets, 3), me.Number)
		switch me.Number {
		case erAccessDenied, erAccessDeniedNoPw:
			return fmt.Sprintf("%s refused the login: %s; give the right user and password in the URL (mysql://USER:PASSWORD@HOST/DB), MYSQL_PWD or an option file", where, what)
		case erBadDB:
			return fmt.Sprintf("%s: %s; name an existing database in the URL's path", where, what)
		case erDBAccessDenied, erTableAccess, erColumnAccess, erSpecificAccess:
			return fmt.Sprintf("%s: %s: %s; the user lacks a privilege leaderrun needs (see docs/stores.md, section MySQL and MariaDB)", where, op, what)
		case erTooManyConns, erTooManyUserConns, erUserLimitReached:
			return fmt.Sprintf("%s has no connection to spare: %s: %s", where, op, what)
		case erStatementTimeout, erExecutionTimeout, erQueryInterrupted:
			return fmt.Sprintf("no answer from %s in time: %s: the statement timed out", where, op)
		}
		switch kind {
		case lease.ErrUnavailable:
			return fmt.Sprintf("%s is not ready: %s: %s", where, op, what)
		case lease.ErrConfig:
			return fmt.Sprintf("%s: %s: %s", where, op, what)
		}
		return fmt.Sprintf("%s: %s: unexpected answer: %s", where, op, what)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Sprintf("%s: %s: cancelled", where, op)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer from %s in time (%s)", where, op)
	case errors.Is(err, errClosed):
		return fmt.Sprintf("%s: %s: the store is closed", where, op)
	case errors.Is(err, mysql.ErrNoTLS):
		return fmt.Sprintf("%s does not offer TLS, which the URL asks for (tls=true or ca=); use tls=preferred to accept a plain connection", where)
	}
	if kind == lease.ErrConfig {
		if r := storeerr.NetReason(err); r != "" {
			return fmt.Sprintf("cannot verify %s: %s (give the CA with ?ca=FILE)", where, r)
		}
		return fmt.Sprintf("%s: %s: %s", where, op, storeerr.Quote(storeerr.FirstLine(err.Error()), secrets, 3))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("no answer from %s in time (%s)", where, op)
	}
	if r := storeerr.NetReason(err); r != "" {
		return fmt.Sprintf("cannot reach %s: %s", where, r)
	}
	var rec tls.RecordHeaderError
	if errors.As(err, &rec) {
		return fmt.Sprintf("cannot reach %s: the server does not speak TLS", where)
	}
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) {
		return fmt.Sprintf("cannot reach %s: %s: the connection broke", where, op)
	}
	return fmt.Sprintf("cannot reach %s: %s: %s", where, op, storeerr.Quote(storeerr.FirstLine(err.Error()), secrets, 3))
}

// kindOf is the lease sentinel for err, or nil.
func kindOf(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erAccessDenied, erAccessDeniedNoPw, erBadDB, erDBAccessDenied, erTableAccess, erColumnAccess, erSpecificAccess, erUnknownColumn:
			return lease.ErrConfig
		case erTooManyConns, erTooManyUserConns, erUserLimitReached, erLockWaitTimeout, erDeadlock, erServerShutdown,
			erQueryInterrupted, erConnKilled, erStatementTimeout, erExecutionTimeout, erReadOnly, erReadOnlyTx, erSuperReadOnly:
			return lease.ErrUnavailable
		}
		return nil
	}
	if errors.Is(err, errClosed) {
		return nil
	}
	var (
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
	)
	if errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr) ||
		errors.Is(err, mysql.ErrNoTLS) || errors.Is(err, mysql.ErrCleartextPassword) || errors.Is(err, mysql.ErrNativePassword) ||
		errors.Is(err, mysql.ErrOldPassword) || errors.Is(err, mysql.ErrUnknownPlugin) || errors.Is(err, mysql.ErrOldProtocol) {
		return lease.ErrConfig
	}
	// The network, a timeout, a cancelled context, a broken connection:
	// retrying may help.
	return lease.ErrUnavailable
}

// isNum reports whether err is the server's error number n.
func isNum(err error, n uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == n
}

// serverError reports whether err is an answer of the server (the
// connection is fine), not a failure of the connection.
func serverError(err error) bool {
	if errors.As(err, new(dropping)) {
		return false
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number != erConnKilled && me.Number != erServerShutdown
}

// errClosed is returned by calls on a closed Store.
var errClosed = errors.New("the MySQL store is closed")
