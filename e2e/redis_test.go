package e2e

// Black-box tests of leaderrun on a real redis-server. Tests that only add
// keys use the shared server of scripts/test.sh (LEADERRUN_TEST_REDIS), each
// with its own lease names; tests that freeze, kill or reconfigure Redis
// start a private server with scripts/redis.sh and stop it by PID.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// redisE2EName is a lease name unique to this test and process, so tests on
// the shared server never meet each other's keys (or a previous run's).
func redisE2EName(t *testing.T, suffix string) string {
	return fmt.Sprintf("e2e-%s-%d-%s", strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), os.Getpid(), suffix)
}

// redisE2EShared returns the env selecting the shared Redis server.
func redisE2EShared(t *testing.T) (addr string, env []string) {
	addr = requireEnv(t, "LEADERRUN_TEST_REDIS")
	return addr, []string{"LEADERRUN_STORE=redis://" + addr}
}

// redisE2EPrivate starts a redis-server of its own (scripts/redis.sh start
// DIR single) for a test that freezes, kills or reconfigures it; it is
// stopped by PID at cleanup. It returns the address and the server's PID.
func redisE2EPrivate(t *testing.T) (addr string, pid int) {
	t.Helper()
	requireEnv(t, "LEADERRUN_TEST_REDIS") // the same prerequisites as the shared server
	env := leasetest.StartServer(t, t.TempDir(), "scripts/redis.sh", "single")
	if env["LEADERRUN_TEST_REDIS"] == "" {
		t.Fatalf("scripts/redis.sh wrote no address: %v", env)
	}
	return env["LEADERRUN_TEST_REDIS"], leasetest.ServerPID(t, env, "LEADERRUN_TEST_REDIS_PID")
}

// redisE2ECLI runs redis-cli against addr and returns its trimmed output.
func redisE2ECLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...)
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH=") // never a stray password
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// 20 instances started at once on one name, all waiting: every one runs,
// never two at a time, tokens strictly increase in run order.
func TestRedisManyInstancesNoOverlap(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	runCrowd(t, env, redisE2EName(t, "crowd"), 20, "sleep 0.02")
}

// --wait 0 against a held lease: exit 75, the child never starts.
func TestRedisNoWaitConflict(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	name := redisE2EName(t, "busy")
	leader, _ := holdLease(t, env, name, "--holder", "the-leader")
	marker := filepath.Join(t.TempDir(), "started")
	for i := 0; i < 3; i++ {
		code, stderr := runLR(t, env, "--wait", "0", "--name", name, "--", "touch", marker)
		if code != 75 {
			t.Fatalf("attempt %d: exit %d; want 75 (stderr: %s)", i, code, stderr)
		}
		if !strings.Contains(stderr, "the-leader") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("attempt %d: want one stderr line naming the holder, got %q", i, stderr)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a conflicting instance started its child")
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
}

// The Redis server frozen (SIGSTOP) or killed under a running leader: the
// child gets the stop signal and is dead before last_sent + TTL, where
// last_sent is when the last renewal that Redis confirmed was sent; exit 124.
// The margin (last_sent + TTL − death) is logged: bench-redis.sh reports it.
func TestRedisServerFrozenStopsChild(t *testing.T) {
	t.Parallel()
	t.Run("stop", func(t *testing.T) { t.Parallel(); redisE2EServerFault(t, syscall.SIGSTOP, false) })
	t.Run("kill-path", func(t *testing.T) { t.Parallel(); redisE2EServerFault(t, syscall.SIGSTOP, true) })
}

func TestRedisServerKilledStopsChild(t *testing.T) {
	t.Parallel()
	redisE2EServerFault(t, syscall.SIGKILL, false)
}

// redisE2EServerFault runs a leader (--ttl 3s --renew-every 500ms --grace
// 1s) on a private server, sends sig to the server after a confirmed
// renewal and checks the child is dead before the lease could expire. With
// ignoreTerm the child ignores the stop signal, so the SIGKILL at E−K is
// what ends it.
func redisE2EServerFault(t *testing.T, sig syscall.Signal, ignoreTerm bool) {
	const ttl = 3 * time.Second
	addr, serverPID := redisE2EPrivate(t)
	if sig == syscall.SIGSTOP {
		t.Cleanup(func() { _ = syscall.Kill(serverPID, syscall.SIGCONT) })
	}
	got := filepath.Join(t.TempDir(), "got")
	script := fmt.Sprintf(`trap 'echo TERM >> %s; exit 0' TERM; echo "ready $$"; while :; do sleep 0.05; done`, got)
	if ignoreTerm {
		script = fmt.Sprintf(`trap 'echo TERM >> %s' TERM; echo "ready $$"; while :; do sleep 0.05; done`, got)
	}
	p := start(t, []string{"LEADERRUN_STORE=redis://" + addr},
		"-v", "--log-format", "json", "--name", "fault", "--ttl", ttl.String(),
		"--renew-every", "500ms", "--grace", "1s", "--", "sh", "-c", script)
	f := strings.Fields(p.line())
	if len(f) != 2 || f[0] != "ready" {
		t.Fatalf("child said %q", f)
	}
	child, _ := strconv.Atoi(f[1])
	waitStderr(t, p, `"event":"renewed"`, 5*time.Second)
	died := deathWatch(child)
	if err := syscall.Kill(serverPID, sig); err != nil {
		t.Fatal(err)
	}
	faultAt := time.Now()
	if code := p.wait(); code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, p.stderr.String())
	}
	var death time.Time
	select {
	case death = <-died:
	case <-time.After(5 * time.Second):
		t.Fatalf("child %d still alive after leaderrun exited", child)
	}
	sent := renewalsSent(t, p)
	last := sent[len(sent)-1]
	if last.After(faultAt) {
		t.Fatalf("a renewal sent after the fault (%v > %v) was confirmed", last, faultAt)
	}
	margin := last.Add(ttl).Sub(death)
	t.Logf("MARGIN %s ignore_term=%v: child dead %v before last_sent+TTL (death %v after the fault)",
		unixSignalName(sig), ignoreTerm, margin.Round(time.Millisecond), death.Sub(faultAt).Round(time.Millisecond))
	if margin <= 0 {
		t.Fatalf("the child died %v AFTER the lease could have expired", -margin)
	}
	if b, _ := os.ReadFile(got); !strings.Contains(string(b), "TERM") {
		t.Fatalf("the child never got the stop signal (SIGTERM)")
	}
	m := lastJSON(t, p)
	if m["event"] != "lost" || m["exit_code"] != float64(124) {
		t.Fatalf("final line %v; want event lost, exit_code 124", m)
	}
	if ignoreTerm && !strings.Contains(p.lastLine(), "SIGKILL") {
		t.Fatalf("final line %q does not say SIGKILL followed", p.lastLine())
	}
}

func unixSignalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return s.String()
}

// The holder record deleted, or overwritten by another value with its TTL
// kept, under a running leader: the next renewal sees it is not ours, the
// child is stopped at once (one renew interval plus the stop sequence), exit
// 124, and the final line says lost.
func TestRedisKeyBrokenStopsChild(t *testing.T) {
	t.Parallel()
	addr, env := redisE2EShared(t)
	const renew = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		cmd  func(key string) []string
	}{
		{"deleted", func(key string) []string { return []string{"DEL", key} }},
		{"overwritten", func(key string) []string {
			return []string{"SET", key, `{"holder":"intruder","id":"not-yours","token":999999,"since":"2020-01-01T00:00:00Z","ttl_ms":15000}`, "KEEPTTL"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := redisE2EName(t, "victim")
			p, child := holdLease(t, env, name, "--log-format", "json", "--renew-every", renew.String())
			t0 := time.Now()
			redisE2ECLI(t, addr, tc.cmd("leaderrun:{"+name+"}")...)
			if code := p.wait(); code != 124 {
				t.Fatalf("exit %d; want 124 (stderr: %s)", code, p.stderr.String())
			}
			took := time.Since(t0)
			waitGone(t, child, time.Second)
			// sleep dies of the TERM at once; allow for scheduling under -race.
			if limit := renew + 500*time.Millisecond; took > limit {
				t.Fatalf("leaderrun took %v to stop the child; want ≤ %v (one renew interval + stop)", took, limit)
			}
			t.Logf("%s: stopped and exited %v after the change", tc.name, took.Round(time.Millisecond))
			m := lastJSON(t, p)
			if m["event"] != "lost" || m["exit_code"] != float64(124) || !strings.Contains(fmt.Sprint(m["msg"]), "lost") {
				t.Fatalf("final line %v; want event lost, exit_code 124", m)
			}
			if tc.name == "overwritten" {
				// Release must not have deleted the intruder's record.
				if v := redisE2ECLI(t, addr, "GET", "leaderrun:{"+name+"}"); !strings.Contains(v, "intruder") {
					t.Fatalf("the intruder's record was touched: %q", v)
				}
				redisE2ECLI(t, addr, "DEL", "leaderrun:{"+name+"}")
			}
		})
	}
}

// A clean exit wakes a waiting instance through the release notification
// (pub/sub), not its PTTL sleep (15s here): the waiter's child starts within
// 50 ms of the leader's child being told to exit (the requirement).
//
// Robustness choice: one try can be slowed by the scheduler on 2 busy cores
// under -race (other parallel tests), so we do 5 tries and assert the
// MEDIAN < 50ms, and every try < 1s (which still proves the wake-up is the
// notification and not the 15s PTTL fallback).
func TestRedisCleanHandoverFast(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	name := redisE2EName(t, "hand")
	var lat []time.Duration
	for i := 0; i < 5; i++ {
		leader, stdin := startStdin(t, env, "--name", name, "--", "sh", "-c", "echo ready; read x; exit 0")
		if l := leader.line(); l != "ready" {
			t.Fatalf("leader's child said %q", l)
		}
		waiter := start(t, env, "--name", name, "--wait", "60s", "--", "date", "+%s%N")
		waitStderr(t, waiter, "waiting", 30*time.Second)
		t0 := time.Now()
		stdin.Close() // the leader's child reads EOF and exits
		ns, err := strconv.ParseInt(waiter.line(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Unix(0, ns).Sub(t0)
		lat = append(lat, d)
		if c := leader.wait(); c != 0 {
			t.Fatalf("leader exit %d: %s", c, leader.stderr.String())
		}
		if c := waiter.wait(); c != 0 {
			t.Fatalf("waiter exit %d: %s", c, waiter.stderr.String())
		}
		if d > time.Second {
			t.Fatalf("try %d: handover took %v: the waiter was not woken by the release notification", i, d)
		}
	}
	t.Logf("handover latencies %v", lat)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if med := lat[len(lat)/2]; med >= 50*time.Millisecond {
		t.Fatalf("median handover %v; want < 50ms (all: %v)", med, lat)
	}
}

// leaderrun SIGKILLed: its child dies with it (PDEATHSIG) within 1s, and a
// waiting instance takes over within TTL + 1s of the kill (no release was
// published: the waiter's PTTL sleep brings it back).
func TestRedisLeaderKilledFailover(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	const ttl = 2 * time.Second
	name := redisE2EName(t, "crash")
	leader, child := holdLease(t, env, name, "--ttl", ttl.String())
	waiter := start(t, env, "--name", name, "--ttl", ttl.String(), "--wait", "60s", "--", "date", "+%s%N")
	waitStderr(t, waiter, "waiting", 30*time.Second)
	t0 := time.Now()
	_ = leader.cmd.Process.Kill()
	leader.wait()
	waitGone(t, child, time.Second)
	ns, err := strconv.ParseInt(waiter.line(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Unix(0, ns).Sub(t0)
	t.Logf("takeover %v after the kill (%.3f × TTL)", took.Round(time.Millisecond), float64(took)/float64(ttl))
	if took > ttl+time.Second {
		t.Fatalf("takeover took %v; want ≤ TTL + 1s = %v", took, ttl+time.Second)
	}
	if c := waiter.wait(); c != 0 {
		t.Fatalf("waiter exit %d: %s", c, waiter.stderr.String())
	}
}

// 100 sequential acquisitions: the fencing token strictly increases.
func TestRedisTokensIncrease(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	name := redisE2EName(t, "tok")
	var last uint64
	for i := 0; i < 100; i++ {
		cmd := exec.Command(lrBin, "-q", "--wait", "0", "--name", name, "--", "sh", "-c", `echo $LEADERRUN_TOKEN`)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		tok, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("run %d: token %q after %d; want strictly greater", i, out, last)
		}
		last = tok
	}
}

// A password in the URL (or REDISCLI_AUTH) never shows on stderr or in
// status's output, in text or JSON logs, whether it is right or wrong.
func TestRedisPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	addr, _ := redisE2EPrivate(t)
	const pass = "Sup3r-s3cret-PW"
	const wrong = "Wr0ng-s3cret-PW"
	redisE2ECLI(t, addr, "CONFIG", "SET", "requirepass", pass)
	secrets := []string{pass, wrong}
	check := func(t *testing.T, what, s string) {
		t.Helper()
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				t.Fatalf("%s shows the password %q: %s", what, sec, s)
			}
		}
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			for _, tc := range []struct {
				name, url string
				env       []string
				ok        bool
			}{
				{"url", "redis://:" + pass + "@" + addr, nil, true},
				{"url-user", "redis://default:" + pass + "@" + addr + "/0", nil, true},
				{"env", "redis://" + addr, []string{"REDISCLI_AUTH=" + pass}, true},
				{"url-wrong", "redis://:" + wrong + "@" + addr, nil, false},
				{"url-user-wrong", "redis://default:" + wrong + "@" + addr, nil, false},
				{"env-wrong", "redis://" + addr, []string{"REDISCLI_AUTH=" + wrong}, false},
			} {
				env := append([]string{"LEADERRUN_STORE=" + tc.url}, tc.env...)
				code, stderr := runLR(t, env, "-v", "--log-format", format, "--name", "pw", "--", "true")
				check(t, tc.name+" run stderr", stderr)
				lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
				if tc.ok && code != 0 {
					t.Fatalf("%s: exit %d with the right password: %s", tc.name, code, stderr)
				}
				if !tc.ok && (code != 125 || len(lines) != 1) {
					t.Fatalf("%s: exit %d, %d lines with a wrong password; want 125 and one line: %s", tc.name, code, len(lines), stderr)
				}
				for _, args := range [][]string{{"status", "pw"}, {"status", "--json", "pw"}} {
					args = append([]string{"--log-format", format}, args...)
					cmd := exec.Command(lrBin, args...)
					cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
					var so, se lockedBuffer
					cmd.Stdout, cmd.Stderr = &so, &se
					err := cmd.Run()
					code := 0
					if ee, ok := err.(*exec.ExitError); ok {
						code = ee.ExitCode()
					}
					check(t, tc.name+" status", so.String()+se.String())
					if tc.ok && code != 3 || !tc.ok && code != 125 {
						t.Fatalf("%s %v: exit %d (stdout %q, stderr %q)", tc.name, args, code, so.String(), se.String())
					}
				}
			}
		})
	}
}

// Sentinel and Cluster URLs: a child runs, and status works on the cluster.
func TestRedisSentinelAndCluster(t *testing.T) {
	t.Parallel()
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		s := requireEnv(t, "LEADERRUN_TEST_REDIS_SENTINEL")
		master := requireEnv(t, "LEADERRUN_TEST_REDIS_SENTINEL_MASTER")
		env := []string{"LEADERRUN_STORE=redis+sentinel://" + s + "/" + master}
		cmd := exec.Command(lrBin, "--name", redisE2EName(t, "s"), "--", "sh", "-c", `echo "token $LEADERRUN_TOKEN"`)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil || !strings.HasPrefix(string(out), "token ") {
			t.Fatalf("sentinel run: %v: %s", err, out)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := requireEnv(t, "LEADERRUN_TEST_REDIS_CLUSTER")
		env := []string{"LEADERRUN_STORE=redis+cluster://" + c}
		name := redisE2EName(t, "c")
		leader, _ := holdLease(t, env, name, "--holder", "cluster-leader")
		code, m := statusJSON(t, env, name)
		if code != 0 || m["held"] != true || m["holder"] != "cluster-leader" || m["token"] == nil {
			t.Fatalf("cluster status while held: %d %v", code, m)
		}
		_ = leader.cmd.Process.Signal(syscall.SIGTERM)
		if c := leader.wait(); c != 143 {
			t.Fatalf("leader exit %d: %s", c, leader.stderr.String())
		}
		if code, m := statusJSON(t, env, name); code != 3 || m["held"] != false {
			t.Fatalf("cluster status after release: %d %v", code, m)
		}
		if code, stderr := runLR(t, env, "--wait", "0", "--name", name, "--", "true"); code != 0 {
			t.Fatalf("cluster run: exit %d: %s", code, stderr)
		}
	})
}
