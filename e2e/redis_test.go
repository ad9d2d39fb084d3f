package e2e

// Black-box tests of leaderrun on a real redis-server. Tests that only add
// keys use the shared server of scripts/test.sh (LEADERRUN_TEST_REDIS), each
// with its own lease names; tests that freeze, kill or reconfigure Redis
// start a private server with scripts/redis.sh and stop it by PID.

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// redisStore is the Redis server for the shared store tests
// (storefaults_test.go).
var redisStore = faultStore{
	envVar:           "LEADERRUN_TEST_REDIS",
	pidVar:           "LEADERRUN_TEST_REDIS_PID",
	storeURL:         func(addr string) string { return "redis://" + addr },
	script:           "scripts/redis.sh",
	scriptArgs:       []string{"single"},
	benchScript:      "scripts/bench-redis.sh",
	marginIgnoreTerm: true,
	wakeBy:           "the release notification",
	holdWrites:       redisHoldWrites,
}

// redisE2EShared returns the shared Redis server's address and the env
// selecting it.
func redisE2EShared(t *testing.T) (addr string, env []string) { return redisStore.shared(t) }

// redisE2EPrivate starts a redis-server of its own (scripts/redis.sh start
// DIR single) for a test that freezes, kills or reconfigures it; it is
// stopped by PID at cleanup. It returns the address and the server's PID.
func redisE2EPrivate(t *testing.T) (addr string, pid int) { return redisStore.private(t) }

// redisE2ECLI runs redis-cli against addr and returns its trimmed output.
func redisE2ECLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...)
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH=") // never a stray password
	return toolOutput(t, cmd)
}

// The shared store tests on Redis (storefaults_test.go). The clean handover
// is woken by the release notification (pub/sub), far sooner than the
// holder's TTL (the latency figure is BenchmarkRedisHandover's); after a
// leader is SIGKILLed (no release published) the waiter's PTTL sleep brings
// it back.
func TestRedisManyInstancesNoOverlap(t *testing.T) { testManyInstances(t, redisStore) }
func TestRedisNoWaitConflict(t *testing.T)         { testNoWaitConflict(t, redisStore) }
func TestRedisCleanHandoverFast(t *testing.T)      { testCleanHandover(t, redisStore) }
func TestRedisLeaderKilledFailover(t *testing.T)   { testLeaderKilledFailover(t, redisStore) }
func TestRedisTokensIncrease(t *testing.T)         { testTokensIncrease(t, redisStore) }

// The Redis server frozen (SIGSTOP) or killed under a running leader: the
// child is dead (by the kernel's clock) before the lease's expiry as Redis
// holds it (PEXPIRETIME); exit 124 (testServerFault). The kill-path
// subtest's child ignores the stop signal. bench-redis.sh reports the MARGIN
// lines.
func TestRedisServerFrozenStopsChild(t *testing.T) {
	t.Parallel()
	t.Run("stop", func(t *testing.T) { t.Parallel(); testServerFault(t, redisStore, syscall.SIGSTOP, false) })
	t.Run("kill-path", func(t *testing.T) { t.Parallel(); testServerFault(t, redisStore, syscall.SIGSTOP, true) })
}

func TestRedisServerKilledStopsChild(t *testing.T) {
	t.Parallel()
	testServerFault(t, redisStore, syscall.SIGKILL, false)
}

// The holder record deleted, or overwritten by another value with its TTL
// kept, under a running leader: the child is stopped within one renew
// interval, exit 124 (testRecordBroken); an intruder's record is left alone.
func TestRedisKeyBrokenStopsChild(t *testing.T) {
	t.Parallel()
	t.Run("deleted", func(t *testing.T) {
		t.Parallel()
		testRecordBroken(t, redisStore, func(addr, name string) { redisE2ECLI(t, addr, "DEL", "leaderrun:{"+name+"}") })
	})
	t.Run("overwritten", func(t *testing.T) {
		t.Parallel()
		var addr string
		name := testRecordBroken(t, redisStore, func(a, name string) {
			addr = a
			redisE2ECLI(t, addr, "SET", "leaderrun:{"+name+"}", `{"holder":"intruder","id":"not-yours","token":999999,"since":"2020-01-01T00:00:00Z","ttl_ms":15000}`, "KEEPTTL")
		})
		// Release must not have deleted the intruder's record.
		if v := redisE2ECLI(t, addr, "GET", "leaderrun:{"+name+"}"); !strings.Contains(v, "intruder") {
			t.Fatalf("the intruder's record was touched: %q", v)
		}
		redisE2ECLI(t, addr, "DEL", "leaderrun:{"+name+"}")
	})
}

// A password in the URL (or REDISCLI_AUTH) never shows on stderr or in
// status's output, in text or JSON logs, whether it is right or wrong.
func TestRedisPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	addr, _ := redisE2EPrivate(t)
	const pass = "Sup3r-s3cret-PW"
	const wrong = "Wr0ng-s3cret-PW"
	redisE2ECLI(t, addr, "CONFIG", "SET", "requirepass", pass)
	testSecretsNotPrinted(t, []string{pass, wrong}, []secretCase{
		{"url", "redis://:" + pass + "@" + addr, nil, true},
		{"url-user", "redis://default:" + pass + "@" + addr + "/0", nil, true},
		{"env", "redis://" + addr, []string{"REDISCLI_AUTH=" + pass}, true},
		{"url-wrong", "redis://:" + wrong + "@" + addr, nil, false},
		{"url-user-wrong", "redis://default:" + wrong + "@" + addr, nil, false},
		{"env-wrong", "redis://" + addr, []string{"REDISCLI_AUTH=" + wrong}, false},
	}, nil, func(*testing.T) string { return "pw" }, "true")
}

// Sentinel and Cluster URLs: a child runs, and status works on the cluster.
func TestRedisSentinelAndCluster(t *testing.T) {
	t.Parallel()
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		s := requireEnv(t, "LEADERRUN_TEST_REDIS_SENTINEL")
		master := requireEnv(t, "LEADERRUN_TEST_REDIS_SENTINEL_MASTER")
		env := []string{"LEADERRUN_STORE=redis+sentinel://" + s + "/" + master}
		cmd := exec.Command(lrBin, "--name", e2eName(t, "s"), "--", "sh", "-c", `echo "token $LEADERRUN_TOKEN"`)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil || !strings.HasPrefix(string(out), "token ") {
			t.Fatalf("sentinel run: %v: %s", err, out)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := requireEnv(t, "LEADERRUN_TEST_REDIS_CLUSTER")
		testClusterBasics(t, []string{"LEADERRUN_STORE=redis+cluster://" + c})
	})
}
