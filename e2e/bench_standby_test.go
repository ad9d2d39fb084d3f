package e2e

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// BenchmarkRedisStandbyCommands measures what 50 standbys cost a Redis
// server (they may add at most 5 commands/s in total): a leader
// holds a lease (TTL 15s, renewing every 5s) while 50 leaderrun processes
// wait for it; after a warm-up, MONITOR counts the commands the clients send
// (not those scripts run inside) over a window (LEADERRUN_BENCH_WINDOW,
// default 60s), by kind: heartbeats (join.lua), listings (candidates.lua),
// acquisition attempts (acquire.lua), PTTL reads, renewals, and the rest.
// LEADERRUN_BENCH_BIN runs another leaderrun build (say, one without
// standbys, for the baseline) instead of this one.
func BenchmarkRedisStandbyCommands(b *testing.B) {
	redisStore.benchEnv(b) // skip rule
	srv := leasetest.StartServer(b, b.TempDir(), "scripts/redis.sh", "single")
	addr := srv["LEADERRUN_TEST_REDIS"]
	env := []string{"LEADERRUN_STORE=redis://" + addr, "NO_COLOR=1"}
	bin := lrBin
	if v := os.Getenv("LEADERRUN_BENCH_BIN"); v != "" {
		bin = v
	}
	window := 60 * time.Second
	if v := os.Getenv("LEADERRUN_BENCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	const n = 50
	var procs []*exec.Cmd
	startLR := func(args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	b.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	})
	startLR("-q", "--name", "bench", "--holder", "leader", "--", "sleep", "100000")
	for i := range n {
		startLR("-q", "--name", "bench", "--holder", fmt.Sprint("standby-", i), "--", "true")
	}
	sha := func(file string) string {
		src, err := os.ReadFile("lease/redislease/" + file)
		if err != nil {
			b.Fatal(err)
		}
		h := sha1.Sum(src)
		return hex.EncodeToString(h[:])
	}
	kinds := map[string]string{sha("join.lua"): "heartbeat", sha("candidates.lua"): "listing", sha("acquire.lua"): "acquire", sha("renew.lua"): "renew", sha("leave.lua"): "leave"}
	// Warm-up: every standby joined and heartbeat intervals settled (they
	// follow the number of live standbys).
	time.Sleep(40 * time.Second)
	b.ResetTimer()
	host, port, _ := strings.Cut(addr, ":")
	mon := exec.Command("redis-cli", "-h", host, "-p", port, "monitor")
	mon.Env = append(os.Environ(), "REDISCLI_AUTH=")
	out, err := mon.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := mon.Start(); err != nil {
		b.Fatal(err)
	}
	timer := time.AfterFunc(window, func() { _ = mon.Process.Kill() })
	defer timer.Stop()
	counts := map[string]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l := sc.Text()
		if !strings.Contains(l, "] \"") || strings.Contains(l, " lua] ") {
			continue // "OK", or a command a script ran
		}
		f := strings.Fields(l[strings.Index(l, "] \"")+2:])
		cmd := strings.ToLower(strings.Trim(f[0], `"`))
		kind := cmd
		if (cmd == "evalsha" || cmd == "eval") && len(f) > 1 {
			if k, ok := kinds[strings.Trim(f[1], `"`)]; ok {
				kind = k
			} else {
				kind = "script"
			}
		}
		counts[kind]++
	}
	_ = mon.Wait()
	b.StopTimer()
	total := 0
	var parts []string
	for k, c := range counts {
		total += c
		parts = append(parts, fmt.Sprintf("%s %.2f/s", k, float64(c)/window.Seconds()))
		b.ReportMetric(float64(c)/window.Seconds(), k+"/s")
	}
	b.ReportMetric(float64(total)/window.Seconds(), "cmds/s")
	b.Logf("%d standbys, %v window: %.2f commands/s from clients: %s", n, window, float64(total)/window.Seconds(), strings.Join(parts, ", "))
}
