package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/redislease"
	"github.com/redis/go-redis/v9"
)

// The ACL the README gives for a leaderrun user (keep the two in step).
var (
	aclBase = []string{"resetkeys", "~leaderrun:*", "resetchannels", "-@all", "+evalsha", "+eval", "+ping", "+get", "+set", "+del", "+pexpire", "+pttl", "+time",
		"+zadd", "+zrem", "+zrange", "+zrangebyscore", "+zremrangebyscore", "+zcard", "+hset", "+hget", "+hdel", "+hexists"}
	aclChannels = []string{"&leaderrun:*", "+publish", "+subscribe"}
)

// TestACLUser: a Redis 7 user with exactly the README's ACL runs every
// operation without a single ACL denial; without channel permission
// (Redis 7's default for new users) release still succeeds, and a waiter
// notices the release by polling, long before the TTL would end.
func TestACLUser(t *testing.T) {
	addr, _ := private(t)
	raw := plain(t, []string{addr}, false)
	for _, tc := range []struct {
		name     string
		channels bool
		within   time.Duration // how soon after the release the waiter must wake
	}{
		{"WithChannels", true, 500 * time.Millisecond},
		{"NoChannels", false, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []any{"ACL", "SETUSER", "lr-" + tc.name, "reset", "on", ">pw-" + tc.name}
			for _, a := range aclBase {
				args = append(args, a)
			}
			if tc.channels {
				for _, a := range aclChannels {
					args = append(args, a)
				}
			}
			if err := raw.Do(ctxT(t), args...).Err(); err != nil {
				t.Fatal(err)
			}
			if err := raw.Do(ctxT(t), "ACL", "LOG", "RESET").Err(); err != nil {
				t.Fatal(err)
			}
			url := "redis://lr-" + tc.name + ":pw-" + tc.name + "@" + addr
			a := open(t, url, redislease.Options{CallTimeout: time.Second})
			b := open(t, url, redislease.Options{CallTimeout: time.Second})
			name := "acl-" + lease.NewID()[:8]
			const ttl = 10 * time.Second
			la, err := a.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "a", ID: lease.NewID(), TTL: ttl})
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			if err := la.Renew(ctxT(t)); err != nil {
				t.Fatalf("Renew: %v", err)
			}
			if h, err := a.Status(ctxT(t), name); err != nil || h == nil {
				t.Fatalf("Status: %v, %v", h, err)
			}
			cand := lease.Candidate{ID: lease.NewID(), Label: "standby", Since: time.Now()}
			if n, err := b.Join(ctxT(t), name, cand, time.Minute); err != nil || n != 1 {
				t.Fatalf("Join: %d, %v", n, err)
			}
			if cs, h, err := b.Candidates(ctxT(t), name); err != nil || len(cs) != 1 || h == nil {
				t.Fatalf("Candidates: %v, %v, %v", cs, h, err)
			}
			if err := b.Leave(ctxT(t), name, cand.ID); err != nil {
				t.Fatalf("Leave: %v", err)
			}
			_, err = b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: ttl})
			var he *lease.HeldError
			if !errors.As(err, &he) {
				t.Fatalf("second TryAcquire: %v; want HeldError", err)
			}
			woke := make(chan time.Time, 1)
			werr := make(chan error, 1)
			go func() {
				err := b.Wait(ctxT(t), name, he)
				woke <- time.Now()
				werr <- err
			}()
			// With channels: the waiter is subscribed before the release.
			// Without: it has been refused and is polling.
			if tc.channels {
				waitSubscribers(t, raw, "leaderrun:{"+name+"}:released", 1)
			} else {
				waitACLDenial(t, raw, "subscribe")
			}
			released := time.Now()
			if err := la.Release(ctxT(t)); err != nil {
				t.Fatalf("Release: %v; want success with or without channel permission", err)
			}
			select {
			case w := <-woke:
				if err := <-werr; err != nil {
					t.Fatalf("Wait: %v", err)
				}
				took := w.Sub(released)
				t.Logf("waiter woke %v after the release (TTL %v)", took, ttl)
				if took > tc.within {
					t.Fatalf("waiter woke %v after the release; want within %v", took, tc.within)
				}
			case <-time.After(ttl):
				t.Fatal("waiter did not wake after the release")
			}
			lb, err := b.TryAcquire(ctxT(t), lease.Request{Name: name, Label: "b", ID: lease.NewID(), TTL: ttl})
			if err != nil {
				t.Fatalf("TryAcquire after the release: %v", err)
			}
			if err := lb.Release(ctxT(t)); err != nil {
				t.Fatalf("second Release: %v", err)
			}
			// The run history, capped, with the same ACL.
			for i := range 3 {
				run := lease.Run{Name: name, Label: "a", Token: la.Info().Token + uint64(i), Start: time.Now()}
				if err := a.RecordRun(ctxT(t), run, 2); err != nil {
					t.Fatalf("RecordRun: %v", err)
				}
			}
			if runs, err := b.Runs(ctxT(t), name, 0); err != nil || len(runs) != 2 {
				t.Fatalf("Runs: %d runs, %v; want 2", len(runs), err)
			}
			if tc.channels {
				entries, err := raw.ACLLog(ctxT(t), 50).Result()
				if err != nil || len(entries) != 0 {
					for _, e := range entries {
						t.Errorf("ACL denial with the README's full ACL: %s %s", e.Reason, e.Object)
					}
					t.Fatalf("ACL LOG: %d entries, %v", len(entries), err)
				}
			}
		})
	}
}

// waitACLDenial waits until the server logged an ACL denial of object.
func waitACLDenial(t *testing.T, raw redis.UniversalClient, object string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		entries, err := raw.ACLLog(ctxT(t), 50).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Object == object {
				return
			}
		}
	}
	t.Fatalf("no ACL denial of %s logged", object)
}
