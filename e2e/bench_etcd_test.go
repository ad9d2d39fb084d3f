package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
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
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// BenchmarkEtcdHandover is BenchmarkFileHandover on etcd: the waiter is
// woken by its watch of the key.
func BenchmarkEtcdHandover(b *testing.B) {
	benchHandover(b, etcdStore.benchEnv(b))
}

// BenchmarkEtcdFailover is benchFailover on etcd: etcd expires the lease
// and deletes the key, which the waiter's watch sees.
func BenchmarkEtcdFailover(b *testing.B) {
	benchFailover(b, etcdStore.benchEnv(b))
}

// BenchmarkEtcdStandbys measures what N waiting standbys cost an etcd
// server of its own, and the herd when the lease frees: a leader holds a
// lease (TTL 10s) while N leaderrun processes wait for it. Once every
// standby is registered and a warm-up has passed, it reads the server's
// metrics (grpc_server_started_total: unary calls and streams opened, by
// method; grpc_server_msg_received_total for the keep-alive and watch
// streams) over a window of at least 1.2 heartbeat intervals (N/3 s, at
// least 10s; LEADERRUN_BENCH_WINDOW sets it, and caps the settling time
// before it), and counts the server's
// established connections, watchers and the standbys' RSS. Then it stops
// the leader (SIGTERM: its child ends, it releases) and counts the requests
// in the next second and the time until the next child runs. N is each of
// LEADERRUN_BENCH_STANDBYS (comma-separated; default 10,100).
func BenchmarkEtcdStandbys(b *testing.B) {
	etcdStore.benchEnv(b) // skip rule
	ns := []int{10, 100}
	if v := os.Getenv("LEADERRUN_BENCH_STANDBYS"); v != "" {
		ns = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("LEADERRUN_BENCH_STANDBYS=%q: want counts like 10,100", v)
			}
			ns = append(ns, n)
		}
	}
	for _, n := range ns {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchEtcdStandbys(b, n) })
	}
}

func benchEtcdStandbys(b *testing.B, n int) {
	srv := leasetest.StartServer(b, b.TempDir(), "scripts/etcd.sh", "single")
	url := srv["LEADERRUN_TEST_ETCD_URL"]
	addr := strings.TrimPrefix(url, "etcd://")
	_, port, _ := strings.Cut(addr, ":")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	dir := b.TempDir()
	env := append(os.Environ(), "LEADERRUN_STORE="+url, "NO_COLOR=1")
	var procs []*exec.Cmd
	startLR := func(args ...string) *exec.Cmd {
		cmd := exec.Command(lrBin, args...)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs = append(procs, cmd)
		return cmd
	}
	b.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	})
	const ttl = "10s"
	leader := startLR("-q", "--name", "bench", "--ttl", ttl, "--holder", "leader", "--", "sh", "-c", "touch "+dir+"/leader; exec sleep 100000")
	awaitFile(b, filepath.Join(dir, "leader"), 30*time.Second)
	started := time.Now()
	for i := range n {
		startLR("-q", "--name", "bench", "--ttl", ttl, "--holder", fmt.Sprint("standby-", i), "--",
			"sh", "-c", `date +%s%N >"$0/taken.$$"; exec sleep 100000`, dir)
	}
	// Every standby waiting: one watcher each, besides the leader's none (a
	// thousand take a while to start on a busy host: give up only when the
	// count stops growing). A standby between two waits has no watcher for
	// a moment, so a count within 1% of N that holds for 10s will do.
	var waiting float64
	for moved := time.Now(); waiting < float64(n); time.Sleep(100 * time.Millisecond) {
		if w := etcdMetrics(b, addr)["etcd_debugging_mvcc_watcher_total"]; w != waiting {
			waiting, moved = w, time.Now()
		}
		if time.Since(moved) > 10*time.Second && waiting >= float64(n)*0.99 {
			break
		}
		if time.Since(moved) > 30*time.Second {
			b.Fatalf("%v standbys waiting, no more for 30s; want %d", waiting, n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	gr, err := cli.Get(ctx, "leaderrun/bench:candidates/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("N=%d: %v waiting %v after the first standby started, %d registered", n, waiting, time.Since(started).Round(time.Millisecond), gr.Count)
	every := max(time.Second, time.Duration(float64(n)/3*float64(time.Second)))
	window, settle := max(10*time.Second, every*12/10), every+2*time.Second
	if v := os.Getenv("LEADERRUN_BENCH_WINDOW"); v != "" {
		if window, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
		// A shorter settling counts some heartbeats of intervals not yet
		// grown to the crowd's size: the rate errs high.
		settle = min(settle, window)
	}
	time.Sleep(settle) // heartbeat intervals grow to the crowd's size
	b.ResetTimer()
	before := etcdMetrics(b, addr)
	time.Sleep(window)
	after := etcdMetrics(b, addr)
	b.StopTimer()
	steady := after.minus(before)
	secs := window.Seconds()
	b.ReportMetric(steady.requests()/secs, "req/s-waiting")
	b.ReportMetric(after["etcd_debugging_mvcc_watcher_total"], "watchers")
	conns := establishedTo(b, port) - 1 // our own client
	b.ReportMetric(float64(conns), "conns")
	var rss, anon []float64
	for _, p := range procs[1:] {
		rss = append(rss, procStatus(p.Process.Pid, "VmRSS"))
		anon = append(anon, procStatus(p.Process.Pid, "RssAnon"))
	}
	sort.Float64s(rss)
	sort.Float64s(anon)
	b.ReportMetric(rss[len(rss)/2], "MiB-RSS-p50")
	b.ReportMetric(anon[len(anon)/2], "MiB-RssAnon-p50")
	b.Logf("N=%d: waiting %.0fs: %s; %d connections, %v watchers; per standby RSS median %.1f MiB (max %.1f), of it private (RssAnon) median %.1f MiB (max %.1f)",
		n, secs, steady.rates(secs), conns, after["etcd_debugging_mvcc_watcher_total"], rss[len(rss)/2], rss[len(rss)-1], anon[len(anon)/2], anon[len(anon)-1])

	// The release herd: only meaningful while the leader still holds.
	if early, _ := filepath.Glob(filepath.Join(dir, "taken.*")); len(early) > 0 {
		b.Fatalf("N=%d: a standby's child ran before the release: the leader lost the lease while the standbys started", n)
	}
	before = etcdMetrics(b, addr)
	released := time.Now()
	_ = leader.Process.Signal(syscall.SIGTERM)
	time.Sleep(time.Second)
	after = etcdMetrics(b, addr)
	herd := after.minus(before)
	taken, err := filepath.Glob(filepath.Join(dir, "taken.*"))
	if err != nil || len(taken) == 0 {
		b.Fatalf("no standby's child ran within 1s of the release (%v)", err)
	}
	raw, err := os.ReadFile(taken[0])
	if err != nil {
		b.Fatal(err)
	}
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	handover := time.Unix(0, ns).Sub(released)
	b.ReportMetric(herd["LeaseGrant"], "grants-1s-after-release")
	b.ReportMetric(herd.requests(), "req-1s-after-release")
	b.ReportMetric(float64(handover.Microseconds())/1000, "ms-to-next-child")
	b.Logf("N=%d: first second after the release: %.0f requests (%s), %.0f of them acquisition attempts (LeaseGrant); next child ran %v after the SIGTERM; %d children ran",
		n, herd.requests(), herd.counts(), herd["LeaseGrant"], handover.Round(time.Millisecond), len(taken))
}

// etcdSample is one reading of an etcd server's metrics: per gRPC method,
// calls and streams started, plus the messages received on the keep-alive
// and watch streams, and the gauges it reads.
type etcdSample map[string]float64

func etcdMetrics(b *testing.B, addr string) etcdSample {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	s := etcdSample{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:sp], "{")
		method := ""
		if _, rest, ok := strings.Cut(labels, `grpc_method="`); ok {
			method, _, _ = strings.Cut(rest, `"`)
		}
		switch {
		case name == "grpc_server_started_total" && method != "Watch" && method != "LeaseKeepAlive":
			s[method] += v
		case name == "grpc_server_msg_received_total" && (method == "Watch" || method == "LeaseKeepAlive"):
			s[method] += v // one message per keep-alive; watch creations and progress requests
		case name == "etcd_debugging_mvcc_watcher_total":
			s[name] = v
		}
	}
	return s
}

func (s etcdSample) minus(o etcdSample) etcdSample {
	d := etcdSample{}
	for k, v := range s {
		if strings.HasPrefix(k, "etcd_") {
			continue
		}
		if x := v - o[k]; x != 0 {
			d[k] = x
		}
	}
	return d
}

// requests sums every call and stream message counted.
func (s etcdSample) requests() float64 {
	var t float64
	for _, v := range s {
		t += v
	}
	return t
}

func (s etcdSample) keys() []string {
	var ks []string
	for k := range s {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (s etcdSample) rates(secs float64) string {
	var parts []string
	for _, k := range s.keys() {
		parts = append(parts, fmt.Sprintf("%s %.2f/s", k, s[k]/secs))
	}
	return fmt.Sprintf("%.2f requests/s (%s)", s.requests()/secs, strings.Join(parts, ", "))
}

func (s etcdSample) counts() string {
	var parts []string
	for _, k := range s.keys() {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, s[k]))
	}
	return strings.Join(parts, ", ")
}

// establishedTo counts the established TCP connections whose local port is
// port (the server's side), from /proc/net/tcp.
func establishedTo(b *testing.B, port string) int {
	b.Helper()
	p, err := strconv.Atoi(port)
	if err != nil {
		b.Fatal(err)
	}
	want := fmt.Sprintf(":%04X", p)
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "01" {
			n++
		}
	}
	return n
}

// procStatus is the field (VmRSS, RssAnon) of pid's /proc status in MiB (0
// when it cannot be read).
func procStatus(pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// awaitFile waits until path exists.
func awaitFile(b *testing.B, path string, limit time.Duration) {
	b.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not appear in %v", path, limit)
		}
	}
}
