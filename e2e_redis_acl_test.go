package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// A Redis 7 ACL user without channel permission (the default for new users)
// runs leaderrun with no warning at release, and a waiting instance takes
// over soon after the release (by polling), not when the TTL runs out.
func TestRedisACLUserWithoutChannels(t *testing.T) {
	t.Parallel()
	addr, _ := redisE2EPrivate(t)
	redisE2ECLI(t, addr, "ACL", "SETUSER", "lr", "on", ">acl-pw", "resetkeys", "~leaderrun:*", "resetchannels", "-@all",
		"+evalsha", "+eval", "+ping", "+get", "+set", "+del", "+pexpire", "+pttl", "+time")
	env := []string{"LEADERRUN_STORE=redis://lr@" + addr, "REDISCLI_AUTH=acl-pw"}
	name := redisE2EName(t, "acl")
	const ttl = 10 * time.Second
	leader, stdin := startStdin(t, env, "--name", name, "--ttl", ttl.String(), "--", "sh", "-c", "echo ready; read x; exit 0")
	if l := leader.line(); l != "ready" {
		t.Fatalf("leader's child said %q", l)
	}
	waiter := start(t, env, "--name", name, "--ttl", ttl.String(), "--wait", "60s", "--", "date", "+%s%N")
	waitStderr(t, waiter, "waiting", 30*time.Second)
	t0 := time.Now()
	stdin.Close()
	ns, err := strconv.ParseInt(waiter.line(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Unix(0, ns).Sub(t0)
	if c := leader.wait(); c != 0 {
		t.Fatalf("leader exit %d: %s", c, leader.stderr.String())
	}
	if c := waiter.wait(); c != 0 {
		t.Fatalf("waiter exit %d: %s", c, waiter.stderr.String())
	}
	for _, l := range leader.stderrLines() {
		if strings.Contains(l, "WARN") || strings.Contains(strings.ToLower(l), "releas") && strings.Contains(strings.ToLower(l), "fail") {
			t.Fatalf("leader logged %q; want a clean release", l)
		}
	}
	t.Logf("handover %v without channel permission (TTL %v)", d, ttl)
	if d > 2*time.Second {
		t.Fatalf("handover took %v; want about the 200ms poll, far below the TTL %v", d, ttl)
	}
}
