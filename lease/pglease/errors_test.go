package pglease

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/lease"
)

// A session the server ended for idling is an outage to ride out (a
// reconnect), not a configuration error: a waiter exited 125 on it.
func TestIdleCloseIsUnavailable(t *testing.T) {
	for _, code := range []string{"57P05", "25P03", "57P01", "53300"} {
		err := classify("PostgreSQL at h:5432", "renew", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "terminating connection"}, nil)
		if !errors.Is(err, lease.ErrUnavailable) {
			t.Errorf("SQLSTATE %s: %v; want ErrUnavailable", code, err)
		}
	}
	if !idleClosed(&pgconn.PgError{Code: "57P05"}) || idleClosed(&pgconn.PgError{Code: "57P01"}) {
		t.Error("idleClosed: want 57P05 only (and 25P03), not 57P01")
	}
}
