package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkStandbyHerd measures, per store and fleet size N, what N
// standbys of one lease cost the store and how the lease changes hands:
// a leader holds the lease while N leaderrun processes wait for
// it, each store on a server of the benchmark's own (started by the
// project's scripts, stopped by PID). It reports
//
//   - the store requests per second while they wait (file store: the CPU
//     time the standbys use, in ms per second, as it has no server),
//   - the store's client connections while they wait,
//   - the median memory of one standby (leaderrun and its guard, RSS),
//   - after the leader's SIGTERM: the requests in the first second and in
//     the first ten seconds (file: CPU ms), and the time until the next
//     child started.
//
// LEADERRUN_BENCH_STORES picks the stores (comma-separated: file, redis,
// etcd, postgres (its default LISTEN mode: a connection per standby),
// postgres-poll (wait=poll, the mode for fleets), azure; default all but
// postgres), LEADERRUN_BENCH_STANDBYS the fleet sizes (default 10,100; azure
// is capped at LEADERRUN_BENCH_AZURE_MAX, default 200), and
// LEADERRUN_BENCH_WINDOW the steady-state window (default 10s).
func BenchmarkStandbyHerd(b *testing.B) {
	if os.Getenv(redisStore.envVar) == "" && os.Getenv("CI") == "" {
		b.Skip("no servers (run under scripts/bench.sh or scripts/test.sh)")
	}
	stores := []string{"file", "redis", "etcd", "postgres-poll", "azure"}
	if v := os.Getenv("LEADERRUN_BENCH_STORES"); v != "" {
		stores = strings.Split(v, ",")
	}
	ns := benchCounts(b, "LEADERRUN_BENCH_STANDBYS", []int{10, 100})
	azMax := 200
	if v := os.Getenv("LEADERRUN_BENCH_AZURE_MAX"); v != "" {
		azMax, _ = strconv.Atoi(v)
	}
	window := 10 * time.Second
	if v := os.Getenv("LEADERRUN_BENCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	for _, st := range stores {
		for _, n := range ns {
			if st == "azure" && n > azMax {
				continue
			}
			b.Run(fmt.Sprintf("%s/%d", st, n), func(b *testing.B) { benchHerd(b, st, n, window) })
		}
	}
}

func benchCounts(b *testing.B, env string, def []int) []int {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want counts like 10,100", env, v)
		}
		ns = append(ns, n)
	}
	return ns
}

// herdProbe reads one store's server while a fleet waits.
type herdProbe struct {
	env   []string
	flags []string
	// work returns the store's cumulative requests (nil: the file store,
	// measured in the standbys' CPU time instead).
	work func() float64
	// conns returns the server's client connections, the probe's excluded
	// (nil: no server).
	conns func() int
}

func herdStore(b *testing.B, store string, n int) herdProbe {
	dir := b.TempDir()
	switch store {
	case "file":
		return herdProbe{env: []string{"LEADERRUN_STORE=file://" + dir}}
	case "redis":
		srv := leasetest.StartServer(b, dir, "scripts/redis.sh", "single")
		addr := srv["LEADERRUN_TEST_REDIS"]
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
		b.Cleanup(func() { _ = c.Close() })
		// MONITOR shows every command a client sends, and apart from them
		// (as "lua") those the scripts run: count the clients' only.
		host, port, _ := strings.Cut(addr, ":")
		mon := exec.Command("redis-cli", "-h", host, "-p", port, "monitor")
		monOut := filepath.Join(dir, "monitor")
		f, err := os.Create(monOut)
		if err != nil {
			b.Fatal(err)
		}
		mon.Stdout = f
		if err := mon.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = mon.Process.Kill(); _ = mon.Wait(); _ = f.Close() })
		return herdProbe{env: []string{"LEADERRUN_STORE=redis://" + addr},
			work: func() float64 {
				raw, _ := os.ReadFile(monOut)
				n := 0
				for _, l := range strings.Split(string(raw), "\n") {
					if l != "" && !strings.Contains(l, " lua]") && !strings.Contains(l, `"info"`) {
						n++
					}
				}
				return float64(n)
			},
			conns: func() int {
				s, err := c.Info(context.Background(), "clients").Result()
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range strings.Split(s, "\r\n") {
					if v, ok := strings.CutPrefix(l, "connected_clients:"); ok {
						n, _ := strconv.Atoi(v)
						return n - 2 // the probe and MONITOR
					}
				}
				return -1
			}}
	case "etcd":
		srv := leasetest.StartServer(b, dir, "scripts/etcd.sh", "single")
		url := srv["LEADERRUN_TEST_ETCD_URL"]
		addr := strings.TrimPrefix(url, "etcd://")
		_, port, _ := strings.Cut(addr, ":")
		return herdProbe{env: []string{"LEADERRUN_STORE=" + url},
			work:  func() float64 { return etcdMetrics(b, addr).minus(etcdSample{}).requests() }, // minus drops the gauges
			conns: func() int { return establishedTo(b, port) }}
	case "postgres", "postgres-poll":
		maxConns := 100
		if store == "postgres" {
			maxConns = n + 20 // a connection per waiting standby
		}
		srv := leasetest.StartServer(b, dir, "scripts/postgres.sh", fmt.Sprint(maxConns))
		raw := srv[pgE2EEnv]
		c, err := pgx.Connect(context.Background(), raw)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		var own float64
		query := func(sql string) float64 {
			own++
			var v float64
			if err := c.QueryRow(context.Background(), sql).Scan(&v); err != nil {
				b.Fatal(err)
			}
			return v
		}
		storeURL := raw
		if store == "postgres-poll" {
			storeURL += "&wait=poll"
		}
		return herdProbe{env: []string{"LEADERRUN_STORE=" + storeURL},
			// Every statement leaderrun sends is a transaction of its own.
			// A backend reports its counts when it goes idle (at most once
			// a second) or exits, so a reading may lag by about a second.
			work: func() float64 {
				return query("select sum(xact_commit + xact_rollback)::float8 from pg_stat_database") - own
			},
			conns: func() int {
				return int(query("select count(*)::float8 from pg_stat_activity where backend_type = 'client backend'")) - 1
			}}
	case "azure":
		srv := leasetest.StartServer(b, dir, "scripts/azurite.sh")
		target, err := url.Parse(srv["LEADERRUN_TEST_AZURITE"])
		if err != nil {
			b.Fatal(err)
		}
		// Azurite keeps no request counter: a counting proxy in front of it.
		var requests, conns atomic.Int64
		proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
		proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 4 * n}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		hs := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				proxy.ServeHTTP(w, r)
			}),
			ConnState: func(_ net.Conn, s http.ConnState) {
				switch s {
				case http.StateNew:
					conns.Add(1)
				case http.StateClosed, http.StateHijacked:
					conns.Add(-1)
				}
			},
		}
		go func() { _ = hs.Serve(ln) }()
		b.Cleanup(func() { _ = hs.Close() })
		endpoint := "http://" + ln.Addr().String() + strings.TrimRight(target.Path, "/")
		return herdProbe{env: append(azEnv(azDevKey), "LEADERRUN_STORE="+azStoreURL(endpoint, azContainer(), "")),
			flags: []string{"--ttl", "15s"},
			work:  func() float64 { return float64(requests.Load()) },
			conns: func() int { return int(conns.Load()) }}
	}
	b.Fatalf("unknown store %q", store)
	return herdProbe{}
}

func benchHerd(b *testing.B, store string, n int, window time.Duration) {
	probe := herdStore(b, store, n)
	dir := b.TempDir()
	env := append(append(os.Environ(), "NO_COLOR=1"), probe.env...)
	var procs []*exec.Cmd
	startLR := func(stderr string, args ...string) *exec.Cmd {
		cmd := exec.Command(lrBin, append(append([]string{"--name", "herd"}, probe.flags...), args...)...)
		cmd.Env = env
		if stderr != "" {
			f, err := os.Create(stderr)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			cmd.Stderr = f
		}
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
	leaderErr := filepath.Join(dir, "leader.err")
	leader := startLR(leaderErr, "--holder", "leader", "--", "sh", "-c", "touch "+dir+"/leader; exec sleep 100000")
	awaitFile(b, filepath.Join(dir, "leader"), 30*time.Second)
	started := time.Now()
	var standbys []*exec.Cmd
	for i := range n {
		standbys = append(standbys, startLR(filepath.Join(dir, fmt.Sprint("err.", i)), "--holder", fmt.Sprint("standby-", i), "--wait", "forever", "--",
			"sh", "-c", `date +%s%N >"$0/taken.$$"; exec sleep 100000`, dir))
	}
	// Every standby has said it waits (a thousand take a while to start).
	for i := range n {
		for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			raw, _ := os.ReadFile(filepath.Join(dir, fmt.Sprint("err.", i)))
			if strings.Contains(string(raw), "waiting for lease") {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("standby %d did not wait: %s", i, raw)
			}
		}
	}
	b.Logf("%s N=%d: all waiting %v after the first started", store, n, time.Since(started).Round(time.Millisecond))
	time.Sleep(min(window, 10*time.Second)) // registrations settle into their heartbeat intervals
	work := probe.work
	unit := "req"
	if work == nil {
		unit = "cpu-ms"
		work = func() float64 { return cpuMillis(standbys) }
	}
	b.ResetTimer()
	before := work()
	time.Sleep(window)
	steady := (work() - before) / window.Seconds()
	b.StopTimer()
	conns := -1
	if probe.conns != nil {
		conns = probe.conns()
	}
	var rss []float64
	for _, p := range standbys {
		rss = append(rss, treeRSS(p.Process.Pid))
	}
	slices.Sort(rss)
	if early, _ := filepath.Glob(filepath.Join(dir, "taken.*")); len(early) > 0 {
		raw, _ := os.ReadFile(leaderErr)
		b.Fatalf("%s N=%d: a standby's child ran before the release: the leader lost the lease:\n%s", store, n, raw)
	}
	before = work()
	released := time.Now()
	_ = leader.Process.Signal(syscall.SIGTERM)
	time.Sleep(time.Second)
	burst1 := work() - before
	time.Sleep(9 * time.Second)
	burst10 := work() - before
	taken, _ := filepath.Glob(filepath.Join(dir, "taken.*"))
	if len(taken) == 0 {
		b.Fatalf("%s N=%d: no standby's child ran within 10s of the release", store, n)
	}
	raw, err := os.ReadFile(taken[0])
	if err != nil {
		b.Fatal(err)
	}
	nsec, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	handover := time.Unix(0, nsec).Sub(released)
	b.ReportMetric(steady, unit+"/s-waiting")
	b.ReportMetric(burst1, unit+"-1s-after-release")
	b.ReportMetric(burst10, unit+"-10s-after-release")
	b.ReportMetric(float64(handover.Microseconds())/1000, "ms-to-next-child")
	b.ReportMetric(rss[len(rss)/2], "MiB-RSS-per-standby")
	if conns >= 0 {
		b.ReportMetric(float64(conns), "conns-waiting")
	}
	b.Logf("%s N=%d: waiting: %.1f %s/s, %d connections, %.1f MiB per standby (leaderrun + guard, median); after the release: %.0f %s in 1s, %.0f in 10s, next child after %v; %d children ran",
		store, n, steady, unit, conns, rss[len(rss)/2], burst1, unit, burst10, handover.Round(time.Millisecond), len(taken))
}

// cpuMillis sums the user and system time of ps and their children, in ms.
func cpuMillis(ps []*exec.Cmd) float64 {
	var ticks float64
	for _, p := range ps {
		for _, pid := range append([]int{p.Process.Pid}, childPIDs(p.Process.Pid)...) {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			s := string(raw)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			ticks += ut + st
		}
	}
	return ticks * 10 // USER_HZ is 100 on Linux
}

func childPIDs(pid int) []int {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// treeRSS is the RSS of pid and its children (leaderrun and its guard), MiB.
func treeRSS(pid int) float64 {
	t := procStatus(pid, "VmRSS")
	for _, c := range childPIDs(pid) {
		t += procStatus(c, "VmRSS")
	}
	return t
}
