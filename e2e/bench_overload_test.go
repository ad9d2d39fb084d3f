package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

// BenchmarkOverloadMargin measures, once per iteration, the margin between
// the death of a leader's child and the end of its lease in the store,
// when the store stops answering: a private Redis server's writes are
// paused (CLIENT PAUSE WRITE) after the leader's first confirmed renewal,
// so only leaderrun's (or its guard's) own deadline can stop the child,
// which ignores SIGTERM and spins on the CPU (the SIGKILL at E − 250 ms is
// what ends it). The child's death is the kernel's (leasetest.WatchDeath),
// the lease's end Redis's own expiry (PEXPIRETIME and TIME, read while
// writes are paused). It reports the smallest and the median margin and
// the number of trials in which the child outlived the lease ("outlived",
// which must be 0).
//
// scripts/bench-overload.sh runs it on an idle machine, beside stress-ng
// and under a CPU limit: with LEADERRUN_BENCH_CGROUP set to a cgroup
// directory, leaderrun (and so its guard and child) is started inside it.
//
//	go test -run '^$' -bench BenchmarkOverloadMargin -benchtime 100x ./e2e
func BenchmarkOverloadMargin(b *testing.B) {
	if os.Getenv(redisStore.envVar) == "" {
		b.Skip(redisStore.envVar + " is not set; scripts/bench-overload.sh starts a server")
	}
	env := leasetest.StartServer(b, b.TempDir(), "scripts/redis.sh", "single")
	addr := env[redisStore.envVar]
	cgroup := os.Getenv("LEADERRUN_BENCH_CGROUP")
	ttl := cmp.Or(os.Getenv("LEADERRUN_BENCH_TTL"), "2s")
	renew := cmp.Or(os.Getenv("LEADERRUN_BENCH_RENEW_EVERY"), "500ms")
	var margins []time.Duration
	outlived := 0
	for i := 0; i < b.N; i++ {
		m, lines := overloadTrial(b, addr, fmt.Sprintf("overload-%d-%d-%d", os.Getpid(), b.N, i), cgroup, ttl, renew)
		margins = append(margins, m)
		if m < 100*time.Millisecond { // for a look at what was late
			b.Logf("trial %d: margin %v; %s", i, m.Round(time.Millisecond), lines[len(lines)-1])
		}
		if m <= 0 {
			outlived++
		}
	}
	reportMargins(b, margins, outlived)
}

// overloadTrial runs one leader on the Redis server at addr (inside cgroup
// when set), pauses the server's writes after its first confirmed renewal,
// and returns the store's expiry minus the child's death, and leaderrun's
// stderr lines.
func overloadTrial(b *testing.B, addr, name, cgroup, ttl, renew string) (time.Duration, []string) {
	b.Helper()
	args := []string{"-v", "--log-format", "json", "--store", "redis://" + addr, "--name", name,
		"--ttl", ttl, "--renew-every", renew, "--grace", "300ms",
		"--", "sh", "-c", `trap '' TERM; echo "ready $$"; while :; do :; done`}
	cmd := exec.Command(lrBin, args...)
	if cgroup != "" {
		// Enter the cgroup, then become leaderrun: its guard and child
		// start inside it.
		cmd = exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cgroup, lrBin}, args...)...)
	}
	cmd.Env = testEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	renewed := make(chan struct{})
	stderrDone := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(errPipe)
		seen := false
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if !seen && strings.Contains(sc.Text(), `"event":"renewed"`) {
				seen = true
				close(renewed)
			}
		}
		stderrDone <- lines
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 2 || f[0] != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("child said %q (%v): %s", line, err, strings.Join(<-stderrDone, "\n"))
	}
	child, _ := strconv.Atoi(f[1])
	died := leasetest.WatchDeath(b, child)
	select {
	case <-renewed:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("no renewal in 60s: %s", strings.Join(<-stderrDone, "\n"))
	}
	storeEnd := redisHoldWrites(b, addr, name)
	var death leasetest.Death
	select {
	case death = <-died:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		b.Fatalf("child %d still alive 60s after the store's writes were paused", child)
	}
	werr := cmd.Wait()
	lines := <-stderrDone
	unpause(b, addr)
	// 124: leaderrun stopped the child at its deadline; 137: the guard
	// did first, on an older deadline than leaderrun had confirmed (its
	// messages to the guard were late: the load delays both).
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 124 && ee.ExitCode() != 137 {
		b.Fatalf("leaderrun: %v; want exit 124 (or 137): %s", werr, strings.Join(lines, "\n"))
	}
	// The store's expiry read above is early by as long as this process
	// waited between reading its clock and the server's answer (never
	// late), which on a machine this busy can be most of a second. The
	// lease's end is also no earlier than the last confirmed renewal's
	// send time plus the TTL (the server starts counting when it gets
	// it): the later of the two is the better bound, and still one that
	// is never late.
	storeEnd = max(storeEnd, renewedEnd(lines, ttl, death))
	// What was late: leaderrun's SIGKILL (its "stopping child" line plus
	// the delay its final line gives) or the child's exit after it.
	offset := time.Now().Sub(time.Unix(0, 0)) - (lease.BootClock{}).Now() // wall − boot
	why := "SIGKILL time unknown"
	var stop time.Time
	for _, l := range lines {
		var m struct {
			Time time.Time
			Msg  string
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Msg == "stopping child" {
			stop = m.Time
		}
	}
	if sm := regexp.MustCompile(`SIGKILL (\S+) later`).FindStringSubmatch(lines[len(lines)-1]); sm != nil && !stop.IsZero() {
		if after, err := time.ParseDuration(sm[1]); err == nil {
			kill := stop.Add(after).Sub(time.Unix(0, 0)) - offset // on the boot clock
			why = fmt.Sprintf("SIGKILL sent %v before the store's expiry (stop signal %v before it), the child's exit seen %v after the SIGKILL",
				(storeEnd - kill).Round(time.Millisecond), (storeEnd - (stop.Sub(time.Unix(0, 0)) - offset)).Round(time.Millisecond), (death.Boot - kill).Round(time.Millisecond))
		}
	}
	return storeEnd - death.Boot, append(lines, why)
}

// renewedEnd is the last confirmed renewal's send time (leaderrun's
// "sent", on the wall clock) plus ttl, on the boot clock of death; zero
// when no renewal is logged.
func renewedEnd(lines []string, ttl string, death leasetest.Death) time.Duration {
	l, err := time.ParseDuration(ttl)
	if err != nil {
		return 0
	}
	var sent time.Time
	for _, line := range lines {
		var m struct {
			Event string
			Sent  time.Time
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Event == "renewed" && m.Sent.After(sent) {
			sent = m.Sent
		}
	}
	if sent.IsZero() {
		return 0
	}
	return death.Boot + sent.Add(l).Sub(death.Wall)
}

// unpause ends the CLIENT PAUSE of redisHoldWrites.
func unpause(b *testing.B, addr string) {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		b.Fatalf("CLIENT UNPAUSE: %v", err)
	}
}

// testEnv is this process's environment without its LEADERRUN_ variables.
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEADERRUN_") {
			env = append(env, kv)
		}
	}
	return env
}

// lockWatcherEnv marks the test binary re-executed as a lock watcher.
const lockWatcherEnv = "LEADERRUN_TEST_LOCK_WATCHER"

// The lock watcher runs before TestMain (it needs none of its set-up).
func init() {
	if os.Getenv(lockWatcherEnv) != "" {
		lockWatcherMain(os.Getenv(lockWatcherEnv))
	}
}

// BenchmarkOverloadFileMargin is BenchmarkOverloadMargin on the file store,
// whose lease has no TTL: it ends when the holder's lock is let go, which
// the kernel does when the last descriptor of it closes. The harder end is
// leaderrun's own death: each trial SIGKILLs leaderrun while its child
// (which ignores SIGTERM and spins on the CPU) runs, and the guard must
// kill the child's tree, see it gone and only then close its duplicate of
// the lock. The margin is the time from the child's death (the kernel's,
// leasetest.WatchDeath) to the moment a waiter blocked in flock(2) on the
// lock file got the lock (a watcher process of its own, SCHED_FIFO where
// it may be, stamping CLOCK_BOOTTIME the moment flock returns: never
// before the lock was free). It must be positive: the lock never passes
// on while the child runs.
//
//	go test -run '^$' -bench BenchmarkOverloadFileMargin -benchtime 100x ./e2e
func BenchmarkOverloadFileMargin(b *testing.B) {
	dir := b.TempDir()
	cgroup := os.Getenv("LEADERRUN_BENCH_CGROUP")
	// The file lease has no TTL, but its timing is checked as for one
	// (the defaults do not fit under 1.2 % of a core).
	timing := []string{"--ttl", cmp.Or(os.Getenv("LEADERRUN_BENCH_TTL"), "15s")}
	if r := os.Getenv("LEADERRUN_BENCH_RENEW_EVERY"); r != "" {
		timing = append(timing, "--renew-every", r)
	}
	var margins []time.Duration
	outlived := 0
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("overload-%d-%d-%d", os.Getpid(), b.N, i)
		m := fileTrial(b, dir, name, cgroup, timing)
		margins = append(margins, m)
		if m <= 0 {
			b.Logf("trial %d: the lock was free %v before the child died", i, -m)
			outlived++
		}
	}
	reportMargins(b, margins, outlived)
}

// fileTrial runs one leader on the file store in dir (inside cgroup when
// set), SIGKILLs it once its child runs, and returns the moment the lock
// passed to a waiter minus the child's death.
func fileTrial(b *testing.B, dir, name, cgroup string, timing []string) time.Duration {
	b.Helper()
	args := append([]string{"--store", "file://" + dir, "--name", name}, timing...)
	args = append(args, "--", "sh", "-c", `trap '' TERM; echo "ready $$"; while :; do :; done`)
	cmd := exec.Command(lrBin, args...)
	if cgroup != "" {
		cmd = exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cgroup, lrBin}, args...)...)
	}
	cmd.Env = testEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 2 || f[0] != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("child said %q (%v): %s", line, err, stderr.String())
	}
	child, _ := strconv.Atoi(f[1])
	died := leasetest.WatchDeath(b, child)
	free := watchLock(b, filepath.Join(dir, name+".lock"))
	// The holder's process dies: the file lease's end.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	var death leasetest.Death
	select {
	case death = <-died:
	case <-time.After(60 * time.Second):
		b.Fatalf("child %d still alive 60s after leaderrun was killed", child)
	}
	select {
	case at := <-free:
		return at - death.Boot
	case <-time.After(60 * time.Second):
		b.Fatalf("the lock of %s was not free 60s after the child died", name)
	}
	return 0
}

// watchLock starts a lock watcher on path (the test binary re-executed),
// waits until it is about to block in flock(2), and returns a channel that
// receives the CLOCK_BOOTTIME reading at which it got the lock. It is
// stopped at cleanup.
func watchLock(b *testing.B, path string) <-chan time.Duration {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), lockWatcherEnv+"="+path)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	r := bufio.NewReader(out)
	if w, err := r.ReadString('\n'); err != nil || w != "armed\n" {
		b.Fatalf("lock watcher: %q, %v", w, err)
	}
	ch := make(chan time.Duration, 1)
	go func() { // ends when the watcher does: at the latest, its cleanup kill
		var ns int64
		if _, err := fmt.Fscan(r, &ns); err == nil {
			ch <- time.Duration(ns)
		}
	}()
	return ch
}

// lockWatcherMain is the lock watcher of watchLock: it blocks in flock(2)
// for path's exclusive lock, SCHED_FIFO where it may, and prints the
// CLOCK_BOOTTIME reading of the moment it got it.
func lockWatcherMain(path string) {
	runtime.LockOSThread()
	_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 1 /* SCHED_FIFO */, Priority: 1}, 0)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock watcher:", err)
		os.Exit(2)
	}
	fmt.Println("armed")
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock watcher: flock:", err)
		os.Exit(2)
	}
	fmt.Println(ts.Nano())
	os.Exit(0)
}

// reportMargins reports the smallest and the median margin and the number
// of trials in which the child outlived the lease.
func reportMargins(b *testing.B, margins []time.Duration, outlived int) {
	slices.Sort(margins)
	b.ReportMetric(float64(margins[0].Microseconds())/1000, "margin-ms-min")
	b.ReportMetric(float64(margins[len(margins)/2].Microseconds())/1000, "margin-ms-median")
	b.ReportMetric(float64(outlived), "outlived")
	b.ReportMetric(0, "ns/op")
	var low []string
	for _, m := range margins[:min(5, len(margins))] {
		low = append(low, m.Round(time.Millisecond).String())
	}
	b.Logf("%d trials: margin min %v, median %v, max %v (smallest: %s); the child outlived the lease in %d",
		len(margins), margins[0].Round(time.Millisecond), margins[len(margins)/2].Round(time.Millisecond),
		margins[len(margins)-1].Round(time.Millisecond), strings.Join(low, " "), outlived)
}

// BenchmarkOverloadContenders measures liveness on a starved host: each
// iteration starts 20 contenders for one lease at once (--ttl 4s --wait
// 60s; Azure: --ttl 15s, its shortest), each running a child that marks
// its start and end (bash's $EPOCHREALTIME, no fork) and sleeps 200 ms,
// on a private server of the store LEADERRUN_BENCH_STORE names (file,
// redis, etcd, postgres, azure). It reports the contenders' exits by code
// (exit0, exit75, exit125, exit-other: with the store up, every one must
// end with its child's 0 or 75, never 125), the time from one child's end
// to the next child's start (handover-ms-median, -p95, -max: the release,
// the wake-up, the acquisition and the child's start), and children that
// overlapped (must be 0). scripts/bench-overload.sh contenders runs it
// beside stress-ng --cpu 8.
//
//	LEADERRUN_BENCH_STORE=redis go test -run '^$' -bench BenchmarkOverloadContenders -benchtime 10x ./e2e
func BenchmarkOverloadContenders(b *testing.B) {
	const n = 20
	store := cmp.Or(os.Getenv("LEADERRUN_BENCH_STORE"), "file")
	var probe herdProbe
	switch store {
	case "redis": // herdStore's Redis runs MONITOR, a load of its own
		srv := leasetest.StartServer(b, b.TempDir(), "scripts/redis.sh", "single")
		probe.env = []string{"LEADERRUN_STORE=redis://" + srv["LEADERRUN_TEST_REDIS"]}
	case "mysql", "s3", "gcs", "kubernetes":
		probe.env = contendersServer(b, store)
	default:
		probe = herdStore(b, store, n)
	}
	ttl := "4s"
	if store == "azure" {
		ttl = "15s"
	}
	codes := map[int]int{}
	var handovers []time.Duration
	overlaps := 0
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("contend-%d-%d-%d", os.Getpid(), b.N, i)
		marks := filepath.Join(b.TempDir(), "marks")
		// A child stopped by its leaderrun (a lease lost: exit 124) marks
		// its end too, or every later start would count as an overlap
		// (seen on Kubernetes: one lost lease, 19 "overlaps"); the sleep
		// runs in the background so that bash takes the TERM at once.
		child := `trap 'echo "e $EPOCHREALTIME" >>"$0"; exit 143' TERM; echo "s $EPOCHREALTIME" >>"$0"; sleep 0.2 & wait $!; echo "e $EPOCHREALTIME" >>"$0"`
		var ps []*exec.Cmd
		var errs []*bytes.Buffer
		for range n {
			cmd := exec.Command(lrBin, "--name", name, "--ttl", ttl, "--wait", "60s", "--", "bash", "-c", child, marks)
			cmd.Env = append(testEnv(), probe.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			ps, errs = append(ps, cmd), append(errs, &stderr)
		}
		for k, cmd := range ps {
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if err != nil && code < 0 {
				b.Fatalf("contender %d: %v", k, err)
			}
			codes[code]++
			if code != 0 && code != 75 {
				lines := strings.Split(strings.TrimSpace(errs[k].String()), "\n")
				b.Logf("run %d, contender %d: exit %d: %s", i, k, code, lines[len(lines)-1])
			}
			// A release that failed leaves the lease to run out: the next
			// child starts a TTL later. Say so as it happens.
			for _, l := range strings.Split(errs[k].String(), "\n") {
				if strings.Contains(l, "will expire by itself") {
					fmt.Fprintf(os.Stderr, "contenders %s: run %d, contender %d: %s\n", store, i+1, k, l)
				}
			}
		}
		h, o := handoverTimes(b, marks)
		handovers, overlaps = append(handovers, h...), overlaps+o
		// A line a run, as it ends, to stderr (b.Logf prints only when
		// the benchmark ends): a count of a hundred takes over an hour
		// under load, and one stopped early still has its runs' numbers.
		fmt.Fprintf(os.Stderr, "contenders %s: run %d of %d: exits so far %v, overlaps %d; this run's handovers %s; load %s\n",
			store, i+1, b.N, codes, overlaps, spreadOf(h), loadAvg())
	}
	other := b.N * n
	for _, c := range []int{0, 75, 125} {
		other -= codes[c]
	}
	b.ReportMetric(float64(codes[0]), "exit0")
	b.ReportMetric(float64(codes[75]), "exit75")
	b.ReportMetric(float64(codes[125]), "exit125")
	b.ReportMetric(float64(other), "exit-other")
	b.ReportMetric(float64(overlaps), "overlaps")
	if len(handovers) > 0 {
		slices.Sort(handovers)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(handovers[len(handovers)/2]), "handover-ms-median")
		b.ReportMetric(ms(handovers[len(handovers)*95/100]), "handover-ms-p95")
		b.ReportMetric(ms(handovers[len(handovers)-1]), "handover-ms-max")
	}
	b.ReportMetric(0, "ns/op")
	b.Logf("%s: %d runs of %d contenders: exits %v; %d handovers; %d overlaps", store, b.N, n, codes, len(handovers), overlaps)
}

// handoverTimes reads a contenders run's marks ("s TIME" at a child's
// start, "e TIME" at its end, in the order written) and returns the time
// from each child's end to the next child's start, and how many children
// started before the previous one ended.
func handoverTimes(b *testing.B, marks string) ([]time.Duration, int) {
	b.Helper()
	raw, err := os.ReadFile(marks)
	if err != nil {
		b.Fatal(err)
	}
	var out []time.Duration
	overlaps := 0
	var lastEnd float64
	open := 0
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		kind, v, _ := strings.Cut(l, " ")
		t, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("mark %q: %v", l, err)
		}
		switch kind {
		case "s":
			if open > 0 {
				overlaps++
			} else if lastEnd > 0 {
				out = append(out, time.Duration((t-lastEnd)*float64(time.Second)))
			}
			open++
		case "e":
			open--
			lastEnd = t
		}
	}
	return out, overlaps
}

// contendersServer starts a server of the benchmark's own for store
// (stopped by PID at cleanup) and returns the environment that points
// leaderrun at it.
func contendersServer(b *testing.B, store string) []string {
	dir := b.TempDir()
	switch store {
	case "mysql":
		srv := leasetest.StartServer(b, dir, myStore.script)
		return myStore.runEnv(srv[myStore.envVar])
	case "kubernetes":
		srv := leasetest.StartServer(b, dir, kubeStore.script)
		return kubeStore.runEnv(srv[kubeStore.envVar])
	case "s3":
		srv := leasetest.StartServer(b, dir, "scripts/versitygw.sh")
		return []string{"AWS_ACCESS_KEY_ID=" + srv["LEADERRUN_TEST_S3_ACCESS_KEY"], "AWS_SECRET_ACCESS_KEY=" + srv["LEADERRUN_TEST_S3_SECRET_KEY"],
			"LEADERRUN_STORE=s3://leases/bench?endpoint=" + srv[s3E2EEnv]}
	case "gcs":
		srv := leasetest.StartServer(b, dir, "scripts/fakegcs.sh")
		return []string{"STORAGE_EMULATOR_HOST=" + srv[gcsE2EEnv], "LEADERRUN_STORE=gs://leases/bench"}
	}
	b.Fatalf("no server for store %q", store)
	return nil
}

// spreadOf summarizes durations: median and largest, rounded to the
// millisecond ("none" when there are none).
func spreadOf(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	ds = slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("median %v, max %v", ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

// loadAvg is the host's one-minute load average, as /proc/loadavg says it
// ("?" when it cannot be read).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
