package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestRefusalIsBackPressure: a store whose connection the server refuses
// as too many (here the account's MAX_USER_CONNECTIONS, error 1226) is
// unavailable, not misconfigured, and its waiters keep no connection and
// poll only every noRoomPoll for a back-pressure pause.
func TestRefusalIsBackPressure(t *testing.T) {
	raw := leasetest.RequireEnv(t, "LEADERRUN_TEST_MYSQL_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	dbOf := func(user, pass string) *sql.DB {
		v := *u
		v.User = url.UserPassword(user, pass)
		return leasetest.MySQLOperator(t, v.String())
	}
	pw, _ := u.User.Password()
	op := dbOf(u.User.Username(), pw)
	user, pass := "lr_bp_"+lease.NewID()[:8], "pw"+lease.NewID()[:12]
	if _, err := op.ExecContext(ctx, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS 1", user, pass)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = op.ExecContext(context.Background(), fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	if _, err := op.ExecContext(ctx, fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", strings.TrimPrefix(u.Path, "/"), user)); err != nil {
		t.Fatal(err)
	}
	v := *u
	v.User = url.UserPassword(user, pass)
	s, err := Open(ctx, v.String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.turns.Disconnect()
	// The server counts the store's connection out when its thread ends,
	// a moment after the client closed it: wait for its view.
	for n := 1; n > 0; time.Sleep(10 * time.Millisecond) {
		if err := op.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", user).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	blocker, err := dbOf(user, pass).Conn(ctx) // now the account's one connection
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	s.room.enter() // as a polling Wait does
	defer s.room.leave()
	s.room.set(true) // the room looked fine before
	if !s.room.keeping() || s.room.interval(DefaultPoll) != DefaultPoll {
		t.Fatalf("with room a waiter would not keep its connection, or poll every %v", s.room.interval(DefaultPoll))
	}
	_, err = s.Status(ctx, "x")
	if !errors.Is(err, lease.ErrUnavailable) || errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Status at the limit: %v; want ErrUnavailable", err)
	}
	if s.room.keeping() || s.room.due() || s.room.interval(DefaultPoll) != noRoomPoll {
		t.Fatalf("after a refusal: keeping %v, due %v, interval %v; want no connection kept, the room not read, a poll every %v",
			s.room.keeping(), s.room.due(), s.room.interval(DefaultPoll), noRoomPoll)
	}
}
