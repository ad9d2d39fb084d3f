package e2e

// A fleet of standbys against a store's connection limit: the
// waiters must leave the application room, and a store that says "no more
// connections" is back-pressure, not a reason to exit or to retry hot.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/redis/go-redis/v9"
)

// fleetSize is the number of standbys of the fleet tests: more than the
// connection limit of their servers.
const fleetSize = 30

// A PostgreSQL server with max_connections=20, one leader and 30 standbys
// in the mode the README tells fleets to use (wait=poll): the waiters hold
// no connection while they sleep, so the application still connects, and
// every standby is still waiting (none gave up on the full server).
func TestPostgresFleetLeavesRoom(t *testing.T) {
	t.Parallel()
	requireEnv(t, pgE2EEnv)
	const maxConns = 20
	srv := leasetest.StartServer(t, t.TempDir(), "scripts/postgres.sh", fmt.Sprint(maxConns))
	raw := srv[pgE2EEnv]
	env := []string{"LEADERRUN_STORE=" + raw + "&wait=poll"}
	name := e2eName(t, "fleet")
	_, release := leaderUntilStdin(t, env, name, nil)
	defer release()
	var standbys []*lr
	for i := range fleetSize {
		standbys = append(standbys, start(t, env, "--name", name, "--holder", fmt.Sprint("s", i), "--wait", "forever", "--", "true"))
	}
	for _, p := range standbys {
		waitStderr(t, p, "waiting for lease", 60*time.Second)
	}
	ctx := ctxTimeout(t, 30*time.Second)
	app, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatalf("the application could not connect while %d standbys wait (max_connections=%d): %v", fleetSize, maxConns, err)
	}
	defer app.Close(context.Background())
	var conns int
	if err := app.QueryRow(ctx, "select count(*) from pg_stat_activity where backend_type = 'client backend'").Scan(&conns); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d standbys wait; the server has %d client connections (the application's included)", fleetSize, conns)
	for _, p := range standbys {
		select {
		case <-p.done:
			t.Fatalf("a standby exited while waiting: %s", p.stderr.String())
		default:
		}
	}
}

// A Redis server whose maxclients is below what the fleet would use: the
// standbys refused a connection keep waiting, each says so at most once as
// a warning, and once the leader ends the whole fleet runs, one at a time.
func TestRedisFleetMaxClients(t *testing.T) {
	t.Parallel()
	addr, _ := redisE2EPrivate(t)
	ctx := ctxTimeout(t, 30*time.Second)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	env := []string{"LEADERRUN_STORE=redis://" + addr}
	name := e2eName(t, "fleet")
	_, release := leaderUntilStdin(t, env, name, nil)
	// The leader and the administrator have their connections; then the
	// server takes fleetSize/2 more, fewer than the standbys need.
	limit := fleetSize / 2
	if err := admin.ConfigSet(ctx, "maxclients", fmt.Sprint(limit)).Err(); err != nil {
		t.Fatal(err)
	}
	marks := t.TempDir() + "/marks"
	var standbys []*lr
	for i := range fleetSize {
		standbys = append(standbys, start(t, env, "--name", name, "--holder", fmt.Sprint("s", i), "--wait", "forever", "--",
			"sh", "-c", `echo "$0" >> "$1"`, fmt.Sprint("s", i), marks))
	}
	var refused int
	for _, p := range standbys {
		waitStderrAny(t, p, []string{"waiting for lease", "until it answers"}, 60*time.Second)
	}
	info, err := admin.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "rejected_connections:") || strings.Contains(info, "rejected_connections:0\r") {
		t.Fatalf("the server refused no connection with maxclients %d and %d standbys: the test does not test back-pressure\n%s", limit, fleetSize, info)
	}
	if err := admin.ConfigSet(ctx, "maxclients", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	release()
	for _, p := range standbys {
		if code := p.wait(); code != 0 {
			t.Fatalf("a standby exited %d: %s", code, p.stderr.String())
		}
		// The first refusal is said at once; reminders ("failing for …")
		// are spaced by design. Anything more would be a hot retry.
		n := 0
		for _, l := range p.stderrLines() {
			if strings.Contains(l, "until it answers") && !strings.Contains(l, "(failing for") {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("a standby said %d times that the store was unavailable; want at most one warning:\n%s", n, p.stderr.String())
		}
		refused += n
	}
	if got := len(readLines(t, marks)); got != fleetSize {
		t.Fatalf("%d of %d standbys ran", got, fleetSize)
	}
	t.Logf("%d of %d standbys were refused a connection at first; all ran", refused, fleetSize)
}

// readLines returns the lines of a file the test's children appended to.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}
