package e2e

import (
	"os"
	"regexp"
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
	name := e2eName(t, "acl")
	const ttl = 60 * time.Second
	d, leader := handoverOnce(t, env, name, "--ttl", ttl.String())
	for _, l := range leader.stderrLines() {
		if strings.Contains(l, "WARN") || strings.Contains(strings.ToLower(l), "releas") && strings.Contains(strings.ToLower(l), "fail") {
			t.Fatalf("leader logged %q; want a clean release", l)
		}
	}
	t.Logf("handover %v without channel permission (TTL %v)", d, ttl)
	if d >= ttl/10 { // an order of magnitude: a busy machine slows the poll, never to the TTL
		t.Fatalf("handover took %v; want about the 200ms poll, far below the TTL %v", d, ttl)
	}
}

// docs/stores.md's smallest --ttl for Redis (with default flags, and with the
// default 3s grace kept) is what the binary accepts: that value runs, one
// millisecond less is refused as unsafe.
func TestRedisReadmeMinimumTTL(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	b, err := os.ReadFile("docs/stores.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		re    string
		extra []string
	}{
		{`smallest ` + "`--ttl`" + ` accepted with default flags is \*\*([0-9.]+m?s)\*\*`, nil},
		{`keeping the default 3s grace\s+needs ` + "`--ttl`" + ` ≥ ([0-9.]+m?s)`, []string{"--grace", "3s"}},
	} {
		m := regexp.MustCompile(tc.re).FindSubmatch(b)
		if m == nil {
			t.Fatalf("README has no match for %s", tc.re)
		}
		min, err := time.ParseDuration(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		name := e2eName(t, "minttl")
		run := func(ttl time.Duration) (int, string) {
			args := append([]string{"--name", name, "--wait", "0", "--ttl", ttl.String()}, tc.extra...)
			return runLR(t, env, append(args, "--", "true")...)
		}
		if code, out := run(min); code != 0 {
			t.Fatalf("--ttl %v %v (the README's minimum): exit %d: %s", min, tc.extra, code, out)
		}
		if code, out := run(min - time.Millisecond); code != 125 || !strings.Contains(out, "--ttl") {
			t.Fatalf("--ttl %v %v (below the README's minimum): exit %d: %s; want 125 saying which --ttl fits", min-time.Millisecond, tc.extra, code, out)
		}
	}
}
