package e2e

// Black-box tests of leaderrun on a real etcd (leaderrun execs
// leaderrun-etcd for etcd:// URLs). Tests that only add keys use the shared
// single server and 3-member cluster of scripts/test.sh
// (LEADERRUN_TEST_ETCD_URL, LEADERRUN_TEST_ETCD_CLUSTER_URL), each with its
// own lease names; tests that freeze, kill or reconfigure etcd start a
// private server with scripts/etcd.sh and stop it by PID.

import (
	"encoding/json"
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

// etcdE2EShared returns the shared single server's URL and the env
// selecting it.
func etcdE2EShared(t *testing.T) (url string, env []string) {
	url = requireEnv(t, "LEADERRUN_TEST_ETCD_URL")
	return url, []string{"LEADERRUN_STORE=" + url}
}

// etcdE2EPrivate starts an etcd of its own (scripts/etcd.sh start DIR
// single) for a test that freezes, kills or reconfigures it; it is stopped
// by PID at cleanup. It returns the URL and the server's PID.
func etcdE2EPrivate(t *testing.T) (url string, pid int) {
	t.Helper()
	requireEnv(t, "LEADERRUN_TEST_ETCD_URL") // the same prerequisites as the shared server
	env := leasetest.StartServer(t, t.TempDir(), "scripts/etcd.sh", "single")
	if env["LEADERRUN_TEST_ETCD_URL"] == "" {
		t.Fatalf("scripts/etcd.sh wrote no URL: %v", env)
	}
	return env["LEADERRUN_TEST_ETCD_URL"], leasetest.ServerPID(t, env, "LEADERRUN_TEST_ETCD_PID")
}

// etcdctl runs etcdctl against url (etcd://HOSTS) and returns its trimmed
// output.
func etcdctl(t *testing.T, url string, args ...string) string {
	t.Helper()
	cmd := exec.Command("etcdctl", append([]string{"--endpoints=" + strings.TrimPrefix(url, "etcd://")}, args...)...)
	cmd.Env = []string{"ETCDCTL_API=3"} // never a stray password
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDCTL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// 20 instances started at once on one name, all waiting: every one runs,
// never two at a time, tokens strictly increase in run order.
func TestEtcdManyInstancesNoOverlap(t *testing.T) {
	t.Parallel()
	_, env := etcdE2EShared(t)
	runCrowd(t, env, redisE2EName(t, "crowd"), 20, "sleep 0.02")
}

// --wait 0 against a held lease: exit 75, the child never starts.
func TestEtcdNoWaitConflict(t *testing.T) {
	t.Parallel()
	_, env := etcdE2EShared(t)
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

// etcd frozen (SIGSTOP) or killed under a running leader: the child gets
// the stop signal and is dead before last_sent + TTL, where last_sent is
// when the last renewal etcd confirmed was sent; exit 124.
func TestEtcdServerFrozenStopsChild(t *testing.T) {
	t.Parallel()
	etcdE2EServerFault(t, syscall.SIGSTOP)
}

func TestEtcdServerKilledStopsChild(t *testing.T) {
	t.Parallel()
	etcdE2EServerFault(t, syscall.SIGKILL)
}

// etcdE2EServerFault runs a leader (--ttl 3s --renew-every 500ms --grace
// 1s) on a private server, sends sig to the server after a confirmed
// renewal and checks the child is dead before the lease could expire.
func etcdE2EServerFault(t *testing.T, sig syscall.Signal) {
	const ttl = 3 * time.Second
	url, serverPID := etcdE2EPrivate(t)
	if sig == syscall.SIGSTOP {
		t.Cleanup(func() { _ = syscall.Kill(serverPID, syscall.SIGCONT) })
	}
	got := filepath.Join(t.TempDir(), "got")
	script := fmt.Sprintf(`trap 'echo TERM >> %s; exit 0' TERM; echo "ready $$"; while :; do sleep 0.05; done`, got)
	p := start(t, []string{"LEADERRUN_STORE=" + url},
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
	t.Logf("MARGIN %s: child dead %v before last_sent+TTL (death %v after the fault)",
		unixSignalName(sig), margin.Round(time.Millisecond), death.Sub(faultAt).Round(time.Millisecond))
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
}

// The lease's key deleted by someone else under a running leader: the next
// renewal sees it is gone, the child is stopped at once (one renew interval
// plus the stop sequence), exit 124, and the final line says lost.
func TestEtcdKeyDeletedStopsChild(t *testing.T) {
	t.Parallel()
	url, env := etcdE2EShared(t)
	const renew = 200 * time.Millisecond
	name := redisE2EName(t, "victim")
	p, child := holdLease(t, env, name, "--log-format", "json", "--renew-every", renew.String())
	t0 := time.Now()
	if out := etcdctl(t, url, "del", "leaderrun/"+name); out != "1" {
		t.Fatalf("etcdctl del said %q; want 1", out)
	}
	if code := p.wait(); code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, p.stderr.String())
	}
	took := time.Since(t0)
	waitGone(t, child, time.Second)
	// sleep dies of the TERM at once; allow for scheduling under -race.
	if limit := renew + 500*time.Millisecond; took > limit {
		t.Fatalf("leaderrun took %v to stop the child; want ≤ %v (one renew interval + stop)", took, limit)
	}
	t.Logf("stopped and exited %v after the delete", took.Round(time.Millisecond))
	m := lastJSON(t, p)
	if m["event"] != "lost" || m["exit_code"] != float64(124) || !strings.Contains(fmt.Sprint(m["msg"]), "lost") {
		t.Fatalf("final line %v; want event lost, exit_code 124", m)
	}
}

// A clean exit wakes a waiting instance through its watch of the key, not
// the TTL (15 s): every try's child starts well within a second of the
// leader's child being told to exit. The median is logged (the README's
// number).
func TestEtcdCleanHandover(t *testing.T) {
	t.Parallel()
	_, env := etcdE2EShared(t)
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
			t.Fatalf("try %d: handover took %v: the waiter was not woken by its watch", i, d)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("handover latencies %v (median %v)", lat, lat[len(lat)/2])
}

// leaderrun SIGKILLed: its child dies with it within 1s, and a waiting
// instance takes over within TTL + 1s of the kill (etcd expires the lease
// and deletes the key; the waiter's watch sees the delete).
func TestEtcdLeaderKilledFailover(t *testing.T) {
	t.Parallel()
	_, env := etcdE2EShared(t)
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

// 100 sequential acquisitions: the fencing token (the key's create
// revision) strictly increases.
func TestEtcdTokensIncrease(t *testing.T) {
	t.Parallel()
	_, env := etcdE2EShared(t)
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

// A TTL etcd cannot grant exactly: one line, exit 125 (bad configuration),
// no child, before any contact with etcd.
func TestEtcdTTLRefused(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "started")
	for _, ttl := range []string{"1s", "2500ms"} {
		code, stderr := runLR(t, []string{"LEADERRUN_STORE=etcd://127.0.0.1:1"}, "--ttl", ttl, "--name", "ttl", "--", "touch", marker)
		if code != 125 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "--ttl") {
			t.Fatalf("--ttl %s: exit %d, stderr %q; want 125 and one line about --ttl", ttl, code, stderr)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child started")
	}
}

// A password in the URL (or ETCDCTL_USER) never shows on stderr or in
// status's output, in text or JSON logs, whether it is right or wrong.
func TestEtcdPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	url, _ := etcdE2EPrivate(t)
	host := strings.TrimPrefix(url, "etcd://")
	const pass = "Sup3r-s3cret-PW"
	const wrong = "Wr0ng-s3cret-PW"
	etcdctl(t, url, "user", "add", "root:"+pass)
	etcdctl(t, url, "user", "grant-role", "root", "root")
	etcdctl(t, url, "auth", "enable")
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
				{"url", "etcd://root:" + pass + "@" + host, nil, true},
				{"env", url, []string{"ETCDCTL_USER=root:" + pass}, true},
				{"env-password", "etcd://root@" + host, []string{"ETCDCTL_PASSWORD=" + pass}, true},
				{"url-wrong", "etcd://root:" + wrong + "@" + host, nil, false},
				{"env-wrong", url, []string{"ETCDCTL_USER=root:" + wrong}, false},
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

// On the 3-member cluster: a child runs, status shows the holder and token,
// and the lease is free after a clean exit.
func TestEtcdCluster(t *testing.T) {
	t.Parallel()
	url := requireEnv(t, "LEADERRUN_TEST_ETCD_CLUSTER_URL")
	env := []string{"LEADERRUN_STORE=" + url}
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
}

// etcdLeaderIndex returns which of addrs is the Raft leader, asking etcdctl.
func etcdLeaderIndex(t *testing.T, addrs []string) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		cmd := exec.Command("etcdctl", "--endpoints="+strings.Join(addrs, ","), "--command-timeout=1s", "endpoint", "status", "-w", "json")
		cmd.Env = []string{"ETCDCTL_API=3", "PATH=" + os.Getenv("PATH")}
		out, _ := cmd.Output() // a member may be down: the others still answer
		var st []struct {
			Endpoint string
			Status   struct {
				Header struct {
					MemberID uint64 `json:"member_id"`
				}
				Leader uint64
			}
		}
		if json.Unmarshal(out, &st) != nil {
			continue
		}
		for _, s := range st {
			if s.Status.Leader != 0 && s.Status.Leader == s.Status.Header.MemberID {
				for i, a := range addrs {
					if a == s.Endpoint {
						return i
					}
				}
			}
		}
	}
	t.Fatal("no etcd member says it is the leader")
	return -1
}

// On a private 3-member cluster, under a running leader (--ttl 5s
// --renew-every 500ms --grace 1s, so a Raft election of up to about 3.5 s
// fits before the stop point): the Raft leader killed → leaderrun keeps
// its lease through the other members (or, if it cannot, stops the child
// before the lease could expire); then a second member stopped, leaving a
// minority → the child is dead before last_sent + TTL and leaderrun exits 124.
func TestEtcdClusterFaults(t *testing.T) {
	t.Parallel()
	requireEnv(t, "LEADERRUN_TEST_ETCD_CLUSTER_URL") // the same prerequisites as the shared cluster
	env := leasetest.StartServer(t, t.TempDir(), "scripts/etcd.sh", "cluster")
	addrs := strings.Split(env["LEADERRUN_TEST_ETCD_CLUSTER_ADDRS"], ",")
	var pids []int
	for _, p := range strings.Split(env["LEADERRUN_TEST_ETCD_CLUSTER_PIDS"], ",") {
		pid, _ := strconv.Atoi(p)
		pids = append(pids, pid)
	}
	if len(addrs) != 3 || len(pids) != 3 {
		t.Fatalf("want 3 members: %v", env)
	}
	const ttl = 5 * time.Second
	got := filepath.Join(t.TempDir(), "got")
	script := fmt.Sprintf(`trap 'echo TERM >> %s; exit 0' TERM; echo "ready $$"; while :; do sleep 0.05; done`, got)
	p := start(t, []string{"LEADERRUN_STORE=" + env["LEADERRUN_TEST_ETCD_CLUSTER_URL"]},
		"-v", "--log-format", "json", "--name", "cluster-fault", "--ttl", ttl.String(),
		"--renew-every", "500ms", "--grace", "1s", "--", "sh", "-c", script)
	f := strings.Fields(p.line())
	if len(f) != 2 || f[0] != "ready" {
		t.Fatalf("child said %q", f)
	}
	child, _ := strconv.Atoi(f[1])
	waitStderr(t, p, `"event":"renewed"`, 5*time.Second)
	died := deathWatch(child)

	ld := etcdLeaderIndex(t, addrs)
	if err := syscall.Kill(pids[ld], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	before := len(renewalsSent(t, p))
	select {
	case <-p.done:
		// It could not renew in time: then it must have stopped the child
		// before the lease could expire.
		if code := p.wait(); code != 124 {
			t.Fatalf("after the leader was killed: exit %d; want to keep running, or 124 (stderr: %s)", code, p.stderr.String())
		}
		death := <-died
		sent := renewalsSent(t, p)
		if margin := sent[len(sent)-1].Add(ttl).Sub(death); margin <= 0 {
			t.Fatalf("the child died %v after the lease could have expired", -margin)
		}
		t.Logf("leader killed: leaderrun stopped the child in time instead of renewing through the others: %s", p.lastLine())
		return
	case <-time.After(ttl):
	}
	if after := renewalsSent(t, p); len(after) <= before {
		t.Fatalf("no renewal confirmed in %v after the leader was killed, yet leaderrun still runs", ttl)
	} else {
		t.Logf("leader killed: %d renewals confirmed in the %v after (the first sent %v after the kill)", len(after)-before, ttl, after[before].Sub(killed).Round(time.Millisecond))
	}

	other := (ld + 1) % 3
	if err := syscall.Kill(pids[other], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pids[other], syscall.SIGCONT) })
	faultAt := time.Now()
	if code := p.wait(); code != 124 {
		t.Fatalf("minority: exit %d; want 124 (stderr: %s)", code, p.stderr.String())
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
		t.Fatalf("a renewal sent after the minority began (%v > %v) was confirmed", last, faultAt)
	}
	margin := last.Add(ttl).Sub(death)
	t.Logf("MARGIN minority: child dead %v before last_sent+TTL (death %v after the second member stopped)",
		margin.Round(time.Millisecond), death.Sub(faultAt).Round(time.Millisecond))
	if margin <= 0 {
		t.Fatalf("the child died %v AFTER the lease could have expired", -margin)
	}
	if b, _ := os.ReadFile(got); !strings.Contains(string(b), "TERM") {
		t.Fatalf("the child never got the stop signal (SIGTERM)")
	}
	if m := lastJSON(t, p); m["event"] != "lost" || m["exit_code"] != float64(124) {
		t.Fatalf("final line %v; want event lost, exit_code 124", m)
	}
}
