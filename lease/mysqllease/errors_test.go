package mysqllease

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/leaderrun/leaderrun/lease"
)

// TestClassify: the server's and the driver's errors become the lease
// sentinels docs/stores.md promises, in one line without the password.
func TestClassify(t *testing.T) {
	const pw = "Sup3rS3cretPw"
	srv := func(n uint16, msg string) error { return &mysql.MySQLError{Number: n, Message: msg} }
	for _, tc := range []struct {
		err  error
		kind error
		want string
	}{
		{srv(1045, "Access denied for user 'u'@'h' (using password: YES)"), lease.ErrConfig, "refused the login"},
		{srv(1049, "Unknown database 'x'"), lease.ErrConfig, "existing database"},
		{srv(1142, "INSERT command denied to user 'u'@'h' for table 't'"), lease.ErrConfig, "lacks a privilege"},
		{srv(1040, "Too many connections"), lease.ErrUnavailable, "no connection to spare"},
		{srv(1203, "User u already has more than 'max_user_connections' active connections"), lease.ErrUnavailable, "no connection to spare"},
		{srv(1226, "User 'u' has exceeded the 'max_user_connections' resource"), lease.ErrUnavailable, "no connection to spare"},
		{srv(1205, "Lock wait timeout exceeded; try restarting transaction"), lease.ErrUnavailable, "not ready"},
		{srv(1213, "Deadlock found when trying to get lock"), lease.ErrUnavailable, "not ready"},
		{srv(1969, "Query execution was interrupted (max_statement_time exceeded)"), lease.ErrUnavailable, "timed out"},
		{srv(1290, "The MariaDB server is running with the --read-only option"), lease.ErrUnavailable, "not ready"},
		{srv(1406, "Data too long for column 'holder' at row 1"), nil, "unexpected answer"},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), lease.ErrUnavailable, "connection refused"},
		{context.DeadlineExceeded, lease.ErrUnavailable, "no answer"},
		{mysql.ErrInvalidConn, lease.ErrUnavailable, "the connection broke"},
		{mysql.ErrNoTLS, lease.ErrConfig, "does not offer TLS"},
		{x509.UnknownAuthorityError{}, lease.ErrConfig, "cannot verify"},
		{errors.New("weird " + pw), lease.ErrUnavailable, "xxxxx"},
	} {
		err := classify("MySQL at h:3306", "acquire x", tc.err, []string{pw})
		msg := err.Error()
		if tc.kind != nil && !errors.Is(err, tc.kind) || tc.kind == nil && (errors.Is(err, lease.ErrConfig) || errors.Is(err, lease.ErrUnavailable)) {
			t.Errorf("%v: %v is not %v", tc.err, err, tc.kind)
		}
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, pw) || strings.Contains(msg, "\n") {
			t.Errorf("%v: message %q; want one line saying %q, no password", tc.err, msg, tc.want)
		}
	}
	if err := classify("w", "op", context.Canceled, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled call: %v is not context.Canceled", err)
	}
}
