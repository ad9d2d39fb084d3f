package e2e

// The lease's end as the store itself holds it, for the tests that check a
// child is dead before its lease can expire (checkStoppedInTime). Each
// reader first stops the store from applying writes (so no renewal can move
// the expiry after it is read), then reads the expiry and the server's clock
// in one request and turns them into a moment on CLOCK_BOOTTIME: the moment
// the question was sent plus the time the server says remains. The server
// answered after that moment, so the result is never later than the real
// expiry: a margin computed from it is a lower bound.

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/redis/go-redis/v9"
)

// redisHoldWrites pauses every write on the Redis server at addr (CLIENT
// PAUSE WRITE: a renewal script waits; reads go on) for a minute and
// returns the expiry of lease name from PEXPIRETIME and TIME, read in one
// MULTI.
func redisHoldWrites(t testing.TB, addr, name string) time.Duration {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE WRITE: %v", err)
	}
	end, ok := redisLeaseEnd(ctx, t, c, name)
	if !ok {
		t.Fatalf("lease %s is not in the store (or has no TTL)", name)
	}
	return end
}

// redisLeaseEnd reads the expiry of lease name through c (PEXPIRETIME and
// TIME in one MULTI); ok is false when the lease is not in the store. A
// delay between taking the local time and the server running the MULTI
// (this process descheduled on a busy machine) makes the result early by
// that much, never late; so it reads again (the expiry cannot move any
// more) until one round trip takes less than tightRTT, at most 20 times,
// and keeps the latest result.
func redisLeaseEnd(ctx context.Context, t testing.TB, c *redis.Client, name string) (end time.Duration, ok bool) {
	t.Helper()
	key := "leaderrun:{" + name + "}"
	for range 20 {
		var exp *redis.DurationCmd
		var now *redis.TimeCmd
		asked := lease.BootClock{}.Now()
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			exp = p.PExpireTime(ctx, key)
			now = p.Time(ctx)
			return nil
		}); err != nil {
			t.Fatalf("PEXPIRETIME %s, TIME: %v", key, err)
		}
		rtt := lease.BootClock{}.Now() - asked
		if exp.Val() < 0 {
			return end, ok
		}
		// go-redis gives PEXPIRETIME's milliseconds as a Duration since the epoch.
		e := asked + time.UnixMilli(exp.Val().Milliseconds()).Sub(now.Val())
		end, ok = max(end, e), true
		if rtt < tightRTT {
			break
		}
	}
	return end, ok
}

// tightRTT is a store round trip short enough for its lower bound of the
// lease's end to be close to the real one.
const tightRTT = 2 * time.Millisecond

// pgHoldWrites takes an EXCLUSIVE lock on the lease table of the server at
// raw (a renewal's UPDATE waits; reads go on) in a transaction it keeps open
// until the test ends, and returns the expiry of lease name from its row
// (expires − clock_timestamp() on the server).
func pgHoldWrites(t testing.TB, raw, name string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer ccancel()
		_ = conn.Close(cctx)
	})
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE leaderrun_leases IN EXCLUSIVE MODE"); err != nil {
		t.Fatalf("locking the lease table: %v", err)
	}
	var end time.Duration
	for range 20 { // as redisLeaseEnd: the latest of reads, until a quick one
		var ms float64
		asked := lease.BootClock{}.Now()
		if err := tx.QueryRow(ctx, "SELECT extract(epoch FROM expires - clock_timestamp()) * 1000 FROM leaderrun_leases WHERE name = $1", name).Scan(&ms); err != nil {
			t.Fatalf("reading the expiry of %s: %v", name, err)
		}
		end = max(end, asked+time.Duration(ms*float64(time.Millisecond)))
		if rtt := (lease.BootClock{}).Now() - asked; rtt < tightRTT {
			break
		}
	}
	return end
}

// redisE2ELeaseEnd reads the expiry of lease name on the Redis server at
// addr (redisLeaseEnd); ok is false when the lease is not in the store.
func redisE2ELeaseEnd(t *testing.T, addr, name string) (end time.Duration, ok bool) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return redisLeaseEnd(ctx, t, c, name)
}
