package e2e

// Black-box tests of leaderrun on a real etcd (leaderrun execs
// leaderrun-etcd for etcd:// URLs). Tests that only add keys use the shared
// single server and 3-member cluster of scripts/test.sh
// (LEADERRUN_TEST_ETCD_URL, LEADERRUN_TEST_ETCD_CLUSTER_URL), each with its
// own lease names; tests that freeze, kill or reconfigure etcd start a
// private server with scripts/etcd.sh and stop it by PID.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// etcdStore is the etcd server for the shared store tests
// (storefaults_test.go).
var etcdStore = faultStore{
	envVar:      "LEADERRUN_TEST_ETCD_URL",
	pidVar:      "LEADERRUN_TEST_ETCD_PID",
	storeURL:    func(url string) string { return url },
	script:      "scripts/etcd.sh",
	scriptArgs:  []string{"single"},
	benchScript: "scripts/etcd.sh",
	wakeBy:      "its watch",
}

// etcdE2EShared returns the shared single server's URL and the env
// selecting it.
func etcdE2EShared(t *testing.T) (url string, env []string) { return etcdStore.shared(t) }

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
	return toolOutput(t, cmd)
}

// The shared store tests on etcd (storefaults_test.go). A waiter is woken
// by its watch of the key: at a clean release (the median handover is the
// README's number), and when etcd expires a SIGKILLed leader's lease and
// deletes the key. The token is the key's create revision.
func TestEtcdManyInstancesNoOverlap(t *testing.T) { testManyInstances(t, etcdStore) }
func TestEtcdNoWaitConflict(t *testing.T)         { testNoWaitConflict(t, etcdStore) }
func TestEtcdCleanHandover(t *testing.T)          { testCleanHandover(t, etcdStore) }
func TestEtcdLeaderKilledFailover(t *testing.T)   { testLeaderKilledFailover(t, etcdStore) }
func TestEtcdTokensIncrease(t *testing.T)         { testTokensIncrease(t, etcdStore) }

// etcd frozen (SIGSTOP) or killed under a running leader: the child is dead
// (by the kernel's clock) before last_sent + TTL, the earliest the cluster
// may expire the lease (its TimeToLive answers in whole seconds, too coarse
// for a margin of a few hundred milliseconds); exit 124 (testServerFault).
func TestEtcdServerFrozenStopsChild(t *testing.T) {
	t.Parallel()
	testServerFault(t, etcdStore, syscall.SIGSTOP, false)
}

func TestEtcdServerKilledStopsChild(t *testing.T) {
	t.Parallel()
	testServerFault(t, etcdStore, syscall.SIGKILL, false)
}

// The lease's key deleted by someone else under a running leader: the child
// is stopped within one renew interval, exit 124 (testRecordBroken).
func TestEtcdKeyDeletedStopsChild(t *testing.T) {
	t.Parallel()
	testRecordBroken(t, etcdStore, func(url, name string) {
		if out := etcdctl(t, url, "del", "leaderrun/"+name); out != "1" {
			t.Fatalf("etcdctl del said %q; want 1", out)
		}
	})
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
	url, _ := etcdStore.private(t)
	host := strings.TrimPrefix(url, "etcd://")
	const pass = "Sup3r-s3cret-PW"
	const wrong = "Wr0ng-s3cret-PW"
	etcdctl(t, url, "user", "add", "root:"+pass)
	etcdctl(t, url, "user", "grant-role", "root", "root")
	etcdctl(t, url, "auth", "enable")
	testSecretsNotPrinted(t, []string{pass, wrong}, []secretCase{
		{"url", "etcd://root:" + pass + "@" + host, nil, true},
		{"env", url, []string{"ETCDCTL_USER=root:" + pass}, true},
		{"env-password", "etcd://root@" + host, []string{"ETCDCTL_PASSWORD=" + pass}, true},
		{"url-wrong", "etcd://root:" + wrong + "@" + host, nil, false},
		{"env-wrong", url, []string{"ETCDCTL_USER=root:" + wrong}, false},
	}, nil, func(*testing.T) string { return "pw" }, "true")
}

// On the 3-member cluster: a child runs, status shows the holder and token,
// and the lease is free after a clean exit.
func TestEtcdCluster(t *testing.T) {
	t.Parallel()
	url := requireEnv(t, "LEADERRUN_TEST_ETCD_CLUSTER_URL")
	testClusterBasics(t, []string{"LEADERRUN_STORE=" + url})
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
	p, child, died, got := startFaultLeader(t, []string{"LEADERRUN_STORE=" + env["LEADERRUN_TEST_ETCD_CLUSTER_URL"]}, "cluster-fault", ttl, false)

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
		death := awaitDeath(t, child, died)
		sent := renewalsSent(t, p)
		if margin := sent[len(sent)-1].Add(ttl).Sub(death.Wall); margin <= 0 {
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
	checkStoppedInTime(t, p, child, died, got, ttl, 0, time.Now(), "minority", "the second member stopped")
}
