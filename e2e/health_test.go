package e2e

// Black-box tests of health-gated leadership (--health-*), systemd
// notifications (NOTIFY_SOCKET) and --hold-at-least, on the file store, a
// real redis-server and Azurite.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/runner"
)

// healthStore is one store the health and hold tests run on: its
// environment (LEADERRUN_STORE and credentials).
type healthStore struct {
	name string
	env  func(t *testing.T) []string
}

var healthStores = []healthStore{
	{"file", func(t *testing.T) []string { return []string{"LEADERRUN_STORE=" + fileStore(t)} }},
	{"redis", func(t *testing.T) []string { _, env := redisE2EShared(t); return env }},
	{"azurite", func(t *testing.T) []string {
		_, store := azShared(t, "poll=200ms")
		return append(azEnv(azDevKey), "LEADERRUN_STORE="+store)
	}},
	{"etcd", func(t *testing.T) []string { _, env := etcdE2EShared(t); return env }},
	{"postgres", func(t *testing.T) []string { _, env := pgE2EShared(t); return env }},
}

// logTime is the time of the first JSON log line of p with event ev and,
// when n > 0, the n-th such line.
func logTime(t *testing.T, p *lr, ev string, n int) time.Time {
	t.Helper()
	seen := 0
	for _, l := range p.stderrLines() {
		var m struct {
			Time  time.Time `json:"time"`
			Event string    `json:"event"`
		}
		if json.Unmarshal([]byte(l), &m) != nil || m.Event != ev {
			continue
		}
		if seen++; seen == max(n, 1) {
			return m.Time
		}
	}
	t.Fatalf("no %d-th %q event in: %s", max(n, 1), ev, p.stderr.String())
	return time.Time{}
}

// The leader's check starts failing 2s after its child started: after three
// failed checks the child is stopped, the lease released, a waiting standby
// takes over at once, and the leader exits 123 naming the check and its last
// output line. The standby's own check never runs while it waits.
func TestHealthStepDown(t *testing.T) {
	t.Parallel()
	for _, st := range healthStores[:2] { // file, Redis: Azure hands over by polling
		t.Run(st.name, func(t *testing.T) {
			env := st.env(t)
			dir := t.TempDir()
			fail := filepath.Join(dir, "fail")
			checks := filepath.Join(dir, "standby-checks")
			name := e2eName(t, "h")
			leader := start(t, append(slices.Clip(env), "FAIL="+fail), "--name", name, "--log-format", "json",
				"--health-cmd", `test ! -e "$FAIL" || { echo "db: connection refused"; exit 1; }`,
				"--health-interval", "200ms", "--health-timeout", "150ms", "--health-retries", "3",
				"--", "sh", "-c", `echo $$; sleep 2; touch "$FAIL"; exec sleep 300`)
			childPID, _ := strconv.Atoi(leader.line())
			standby := start(t, append(slices.Clip(env), "CHECKS="+checks), "--name", name, "--log-format", "json",
				"--health-cmd", `date +%s%N >> "$CHECKS"`, "--health-interval", "100ms", "--health-timeout", "90ms",
				"--", "sh", "-c", `date +%s%N; sleep 0.5`)
			waitStderr(t, standby, `"event":"waiting"`, 30*time.Second)

			if code := leader.wait(); code != 123 {
				t.Fatalf("leader exited %d; want 123: %s", code, leader.stderr.String())
			}
			last := leader.lastLine()
			for _, want := range []string{"health check (test …) failed 3 times in a row", `db: connection refused`, "stopped sh with SIGTERM", "lease " + name + " released", `"exit_code":123`} {
				if !strings.Contains(last, want) {
					t.Errorf("final line %q lacks %q", last, want)
				}
			}
			if alive(childPID) {
				t.Errorf("the leader's child %d still runs", childPID)
			}
			thirdFail := logTime(t, leader, "health_failed", 3)
			ns, err := strconv.ParseInt(standby.line(), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			standbyStart := time.Unix(0, ns)
			took := standbyStart.Sub(thirdFail)
			t.Logf("third failed check → standby's child started: %v", took)
			if took < 0 || took > time.Second {
				t.Errorf("standby's child started %v after the third failed check; want within 1s", took)
			}
			if code := standby.wait(); code != 0 {
				t.Fatalf("standby exited %d: %s", code, standby.stderr.String())
			}
			b, err := os.ReadFile(checks)
			if err != nil {
				t.Fatalf("the standby's check never ran while it led: %v", err)
			}
			for _, f := range strings.Fields(string(b)) {
				at, _ := strconv.ParseInt(f, 10, 64)
				if at < ns {
					t.Errorf("the standby's check ran at %v, before its child started at %v (while waiting)", time.Unix(0, at), standbyStart)
				}
			}
		})
	}
}

// A check that hangs is killed with its process group at --health-timeout
// and counts as a failure: two in a row make the leader step down.
func TestHealthHangingCheck(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	p := start(t, []string{"PIDS=" + pids}, "--store", fileStore(t), "--name", "hang",
		"--health-cmd", `sleep 300 & echo $! >> "$PIDS"; echo $$ >> "$PIDS"; wait`,
		"--health-interval", "200ms", "--health-timeout", "100ms", "--health-retries", "2",
		"--", "sleep", "300")
	if code := p.wait(); code != 123 {
		t.Fatalf("exit %d; want 123: %s", code, p.stderr.String())
	}
	if last := p.lastLine(); !strings.Contains(last, "failed 2 times in a row (last: timed out after 100ms; killed)") {
		t.Fatalf("final line %q", last)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 4 {
		t.Fatalf("%d check processes recorded; want 2 checks of 2 processes: %q", len(f), b)
	}
	for _, s := range f {
		pid, _ := strconv.Atoi(s)
		waitGone(t, pid, 5*time.Second)
	}
}

// Bad --health-* combinations are refused with one line and exit 125,
// before any child starts.
func TestHealthFlagsRefused(t *testing.T) {
	store := fileStore(t)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--health-interval", "1s"}, "--health-interval without --health-cmd"},
		{[]string{"--health-cmd", "true", "--health-interval", "2s", "--health-timeout", "5s"}, "--health-timeout 5s is longer than --health-interval 2s"},
		{[]string{"--health-cmd", "true", "--health-interval", "50ms", "--health-timeout", "10ms"}, "--health-interval 50ms: want at least 100ms"},
		{[]string{"--health-cmd", "true", "--ttl", "3s", "--health-timeout", "5s"}, "--health-timeout 5s is not shorter than --ttl 3s"},
		{[]string{"--health-cmd", "true", "--health-retries", "0"}, "--health-retries 0: want at least 1"},
		{[]string{"--health-cmd", " "}, "--health-cmd is blank"},
		{[]string{"--hold-at-least", "-1s"}, "--hold-at-least -1s: want a duration from 0 to 744h"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(append([]string{"--store", store, "--name", "hf"}, tc.args...), "--", "touch", marker)
			code, stderr := runLR(t, nil, args...)
			if code != 125 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want 125 and one line with %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child ran")
			}
		})
	}
}

// notifySocket listens on a datagram socket for sd_notify messages; abstract
// says an abstract name (@…) rather than a path. It returns NOTIFY_SOCKET's
// value and a channel of messages.
func notifySocket(t *testing.T, abstract bool) (string, <-chan string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	if abstract {
		name = fmt.Sprintf("@leaderrun-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(msgs)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return name, msgs
}

func nextMsg(t *testing.T, msgs <-chan string, p *lr) string {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("no notification in 30s: %s", p.stderr.String())
		return ""
	}
}

// childrenOf lists the child processes of pid.
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var kids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

// Under NOTIFY_SOCKET a standby says whom it waits for and sends READY=1
// with "leading …" exactly when its child has started (the child exists
// when the message arrives, and nothing said ready before); a failing check
// says it steps down. The child does not get NOTIFY_SOCKET.
func TestSystemdNotify(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run(fmt.Sprintf("abstract=%v", abstract), func(t *testing.T) {
			store := fileStore(t)
			sock, msgs := notifySocket(t, abstract)
			fail := filepath.Join(t.TempDir(), "fail")
			holder, in := startStdin(t, nil, "--store", store, "--name", "sd", "--holder", "host-a", "--", "sh", "-c", "echo up; read x || true")
			if got := holder.line(); got != "up" {
				t.Fatalf("holder's child said %q", got)
			}
			b := start(t, []string{"NOTIFY_SOCKET=" + sock, "FAIL=" + fail}, "--store", store, "--name", "sd", "--holder", "host-b",
				"--health-cmd", `test ! -e "$FAIL"`, "--health-interval", "100ms", "--health-timeout", "90ms", "--health-retries", "1",
				"--", "sh", "-c", `echo "${NOTIFY_SOCKET:-unset}"; exec sleep 300`)
			m := nextMsg(t, msgs, b)
			if !strings.HasPrefix(m, "STATUS=waiting for lease sd held by host-a since ") {
				t.Fatalf("first message %q; want the waiting status", m)
			}
			waiting := childrenOf(t, b.cmd.Process.Pid) // the early guard, if started yet
			in.Close()                                  // the holder's child ends: the lease goes to b
			m = nextMsg(t, msgs, b)
			kids := childrenOf(t, b.cmd.Process.Pid)
			if !strings.HasPrefix(m, "READY=1\nSTATUS=leading sd, token ") || !strings.Contains(m, ", since ") {
				t.Fatalf("message after the handover %q; want READY=1 and the leading status", m)
			}
			if len(kids) != len(waiting)+1 && len(kids) != 2 {
				t.Fatalf("READY=1 arrived while the standby had only children %v; want its child started", kids)
			}
			if got := b.line(); got != "unset" {
				t.Fatalf("the child's NOTIFY_SOCKET is %q; want it removed", got)
			}
			if err := os.WriteFile(fail, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if m = nextMsg(t, msgs, b); m != "STATUS=stepping down: health check failed" {
				t.Fatalf("message %q; want the stepping-down status", m)
			}
			if code := b.wait(); code != 123 {
				t.Fatalf("exit %d; want 123: %s", code, b.stderr.String())
			}
			if code := holder.wait(); code != 0 {
				t.Fatalf("holder exited %d", code)
			}
		})
	}
}

// holdStatus runs `status --json name` and decodes it.
func holdStatus(t *testing.T, env []string, name string) map[string]any {
	t.Helper()
	p := start(t, env, "status", "--json", name)
	out := p.line()
	p.wait()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("status --json printed %q: %v", out, err)
	}
	return m
}

// sleepUntil waits for a deadline (the test is about deadlines: a hold
// ends at a time, with no event to await).
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// --hold-at-least 3s -- true: the lease stays taken after leaderrun exits;
// status shows the hold; another instance with --wait 0 one second after
// the start gets 75; one that waits from the hold's end runs, not before it.
func TestHoldAtLeast(t *testing.T) {
	t.Parallel()
	for _, st := range healthStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			env := st.env(t)
			name := e2eName(t, "hold")
			t0 := time.Now()
			if code, stderr := runLR(t, env, "--name", name, "--hold-at-least", "3s", "--", "true"); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s := holdStatus(t, env, name)
			until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s["held_until"]))
			if s["held"] != true || err != nil {
				t.Fatalf("status %v; want held with held_until", s)
			}
			if until.Before(t0.Add(3 * time.Second)) {
				t.Fatalf("held until %v, less than 3s after the run started at %v", until, t0)
			}
			sleepUntil(t0.Add(time.Second))
			code, stderr := runLR(t, env, "--name", name, "--wait", "0", "--", "echo", "ran")
			if code != 75 || !strings.Contains(stderr, "kept taken until") {
				t.Fatalf("1s later: exit %d, %q; want 75, held by the hold", code, stderr)
			}
			// After the hold the lease is free once the store says so: etcd
			// removes the key when its lease runs out, and its server checks
			// for run-out leases every half second, later under load. So the
			// next run waits (bounded) rather than trying once, and its child
			// must start no earlier than the hold's end.
			sleepUntil(until)
			p := start(t, env, "--name", name, "--wait", "30s", "--", "date", "+%s%N")
			line := p.line()
			if code := p.wait(); code != 0 {
				t.Fatalf("after the hold: exit %d: %s", code, p.stderr.String())
			}
			ns, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				t.Fatalf("after the hold: child said %q", line)
			}
			if ran := time.Unix(0, ns); ran.Before(until) {
				t.Fatalf("the next run's child started at %v, before the hold's end %v", ran, until)
			}
		})
	}
}

// A standby already waiting when the holder releases with a hold wakes when
// the hold ends (not when the lease's TTL would have, nor at once).
func TestHoldWaiterWakesAtEnd(t *testing.T) {
	t.Parallel()
	for _, st := range healthStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			env := st.env(t)
			name := e2eName(t, "holdw")
			leader, in := startStdin(t, env, "--log-format", "json", "--name", name, "--hold-at-least", "5s", "--", "sh", "-c", "echo up; read x || true")
			if got := leader.line(); got != "up" {
				t.Fatalf("leader said %q", got)
			}
			w := start(t, env, "--log-format", "json", "--name", name, "--", "sh", "-c", "date +%s%N")
			waitStderr(t, w, `"event":"waiting"`, 30*time.Second)
			in.Close()
			if code := leader.wait(); code != 0 {
				t.Fatalf("leader exit %d: %s", code, leader.stderr.String())
			}
			var until time.Time
			for _, l := range leader.stderrLines() {
				var m struct {
					Event     string    `json:"event"`
					HeldUntil time.Time `json:"held_until"`
				}
				if json.Unmarshal([]byte(l), &m) == nil && m.Event == "held" {
					until = m.HeldUntil
				}
			}
			if until.IsZero() {
				t.Fatalf("the leader did not release with a hold: %s", leader.stderr.String())
			}
			ns, err := strconv.ParseInt(w.line(), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			late := time.Unix(0, ns).Sub(until)
			t.Logf("waiter's child started %v after the hold's end", late)
			// Azure rounds a break period up to whole seconds.
			if late < 0 || late > 2*time.Second {
				t.Fatalf("waiter's child started %v after the hold's end; want within 2s, not before", late)
			}
			if code := w.wait(); code != 0 {
				t.Fatalf("waiter exit %d", code)
			}
		})
	}
}

// A hold longer than the TTL on Azure (longer than any break period, which
// Azure honours only up to the lease's remaining time): leaderrun exits 0,
// status shows the hold, and a --wait 0 run during the hold finds the lease
// taken. After the hold's end, by the service's clock, a --wait 0 run takes
// it (breaking the held lease), and a standby waiting through the hold starts
// its child soon after the end, never before.
func TestHoldLongerThanTTLAzure(t *testing.T) {
	t.Parallel()
	const ttl = 15 * time.Second     // Azure's shortest lease
	const hold = ttl + 5*time.Second // beyond the longest break period for ttl
	for _, standby := range []bool{false, true} {
		t.Run(map[bool]string{false: "wait0", true: "standby"}[standby], func(t *testing.T) {
			t.Parallel()
			env := healthStores[2].env(t)
			name := e2eName(t, "longhold")
			t0 := time.Now()
			if code, stderr := runLR(t, env, "--name", name, "--ttl", ttl.String(), "--hold-at-least", hold.String(), "--", "true"); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s := holdStatus(t, env, name)
			until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s["held_until"]))
			if s["held"] != true || err != nil || until.Before(t0.Add(hold)) {
				t.Fatalf("status %v; want held until %v after the start", s, hold)
			}
			var w *lr
			if standby {
				w = start(t, env, "--log-format", "json", "--name", name, "--", "sh", "-c", "date +%s%N")
				waitStderr(t, w, `"event":"waiting"`, 30*time.Second)
			}
			marker := filepath.Join(t.TempDir(), "ran")
			code, stderr := runLR(t, env, "--name", name, "--wait", "0", "--", "touch", marker)
			if code != 75 || !strings.Contains(stderr, "kept taken until") {
				t.Fatalf("during the hold: exit %d, %q; want 75", code, stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child ran during the hold")
			}
			if !standby {
				// The service's Date has whole seconds: the hold has ended by
				// its clock from the second after until on.
				sleepUntil(until.Truncate(time.Second).Add(time.Second + 500*time.Millisecond))
				p := start(t, env, "--name", name, "--wait", "0", "--", "echo", "ran")
				if got := p.line(); got != "ran" {
					t.Fatalf("after the hold: child said %q (%s)", got, p.stderr.String())
				}
				if code := p.wait(); code != 0 {
					t.Fatalf("after the hold: exit %d: %s", code, p.stderr.String())
				}
				return
			}
			ns, err := strconv.ParseInt(w.line(), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			late := time.Unix(0, ns).Sub(until)
			t.Logf("standby's child started %v after the hold's end", late)
			// Up to 1s until the service's whole-second Date passes the end,
			// one poll (200ms ±25%), then a break, an acquire and a record.
			if late < 0 || late > 3*time.Second {
				t.Fatalf("standby's child started %v after the hold's end; want within 3s, not before", late)
			}
			if code := w.wait(); code != 0 {
				t.Fatalf("standby exit %d: %s", code, w.stderr.String())
			}
		})
	}
}

// deafNotifySocket is a datagram socket whose receive queue is full and
// never read: a stuck systemd or notify proxy. A blocking sendto to it never
// returns.
func deafNotifySocket(t *testing.T) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "deaf")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrUnix{Name: name}
	for sent := 0; ; sent++ {
		err := unix.Sendto(fd, []byte("STATUS=filler"), unix.MSG_DONTWAIT, to)
		if errors.Is(err, unix.EAGAIN) {
			t.Logf("the notify socket's queue is full after %d messages", sent)
			return name
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A notify socket that does not drain never holds up the run: the leader
// says READY=1 (dropped), runs its health checks, exits and releases as
// without it, and a standby takes over at once.
func TestDeafNotifySocket(t *testing.T) {
	store := fileStore(t)
	env := []string{"NOTIFY_SOCKET=" + deafNotifySocket(t)}
	holder, in := startStdin(t, env, "--store", store, "--name", "deaf", "--", "sh", "-c", "echo up; read x || true")
	if got := holder.line(); got != "up" {
		t.Fatalf("holder's child said %q: %s", got, holder.stderr.String())
	}
	standby := start(t, env, "--store", store, "--name", "deaf", "--health-cmd", "exit 1", "--health-interval", "100ms",
		"--health-timeout", "90ms", "--health-retries", "1", "--", "sleep", "300")
	waitStderr(t, standby, "waiting for lease deaf", 30*time.Second)
	in.Close()
	if code := holder.wait(); code != 0 {
		t.Fatalf("holder exited %d: %s", code, holder.stderr.String())
	}
	// The standby takes over, its check fails at once, and it steps down.
	if code := standby.wait(); code != 123 {
		t.Fatalf("standby exited %d; want 123 (health check failed): %s", code, standby.stderr.String())
	}
}

// procsWith lists the PIDs whose command line contains s.
func procsWith(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A health check belongs to the run: what it leaves behind is killed when
// it ends, even a process that called setsid (the check runs in the child's
// cgroup); a check that exits 0 while a leftover still holds its output is
// judged by its exit status, not reported as timed out (two of those made
// a healthy leader step down with 123).
func TestHealthCheckContained(t *testing.T) {
	t.Parallel()
	if cg, err := runner.NewCgroup(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup containment on this machine: %v", err)
		}
		t.Skipf("no cgroup containment here: %v", err)
	} else if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mark := filepath.Join(dir, "checked")
	// Unique arguments, to find the leftovers by their command line.
	escaped := fmt.Sprintf("4%d.5", os.Getpid())
	holder := fmt.Sprintf("4%d.6", os.Getpid())
	t.Cleanup(func() {
		for _, pid := range append(procsWith("sleep\x00"+escaped), procsWith("sleep\x00"+holder)...) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	check := fmt.Sprintf("setsid sleep %s & sleep %s & touch %s; exit 0", escaped, holder, mark)
	code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "--contain", "cgroup", "--name", "hc",
		// A timeout a loaded machine's shell start meets (90ms did not,
		// beside the whole suite): a check wrongly waiting for the
		// leftover's output would still run into it.
		"--health-cmd", check, "--health-interval", "2s", "--health-timeout", "1500ms", "--health-retries", "1",
		"--", "sh", "-c", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; sleep 0.3", mark))
	if code != 0 {
		t.Fatalf("exit %d; want 0 (every check exited 0): %s", code, stderr)
	}
	if strings.Contains(stderr, "timed out") {
		t.Fatalf("a check that exited 0 was reported as timed out: %s", stderr)
	}
	if left := append(procsWith("sleep\x00"+escaped), procsWith("sleep\x00"+holder)...); len(left) > 0 {
		t.Fatalf("processes a health check started outlived the run: %v", left)
	}
}

// --pass-env NOTIFY_SOCKET keeps the variable for the child (leaderrun
// removes it under systemd otherwise, and said it "never removes" it).
func TestPassEnvNotifySocket(t *testing.T) {
	sock, _ := notifySocket(t, false)
	p := start(t, []string{"NOTIFY_SOCKET=" + sock}, "--store", fileStore(t), "--name", "pass-notify", "--pass-env", "NOTIFY_SOCKET",
		"--", "sh", "-c", `echo "${NOTIFY_SOCKET:-unset}"`)
	if got := p.line(); got != sock {
		t.Fatalf("the child's NOTIFY_SOCKET is %q; want %q kept by --pass-env", got, sock)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr.String())
	}
}

// A running health check dies with a SIGKILLed leaderrun in --contain group
// mode too: the guard knows each check's process group and kills it with the
// child's (the check's shell alone has Pdeathsig; what it started has not).
// The deaths are taken from the kernel (pidfd), not from polling.
func TestHealthCheckDiesWithLeaderrun(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "check")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, []string{"CHECKED=" + fifo}, "--store", fileStore(t), "--name", "hcdies", "--contain", "group",
		"--health-cmd", `sleep 775 & echo $$ $! >"$CHECKED"; wait`,
		"--health-interval", "1s", "--health-timeout", "900ms",
		"--", "sh", "-c", "echo child $$; exec sleep 600")
	child, err := strconv.Atoi(strings.TrimPrefix(p.line(), "child "))
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte, 1)
	go func() { // ends when the check writes, or the test's cleanup kills leaderrun (its checks write nothing then)
		b, _ := os.ReadFile(fifo)
		read <- b
	}()
	var b []byte
	select {
	case b = <-read:
	case <-time.After(30 * time.Second):
		t.Fatalf("no health check ran: %s", p.stderr.String())
	}
	var sh, sleep int
	if _, err := fmt.Sscan(string(b), &sh, &sleep); err != nil {
		t.Fatalf("check wrote %q: %v", b, err)
	}
	pidfds := map[string]int{}
	for what, pid := range map[string]int{"the child": child, "the check's shell": sh, "the check's sleep": sleep} {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open %s (%d): %v (the check ended before leaderrun was killed?)", what, pid, err)
		}
		t.Cleanup(func() {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
		})
		pidfds[what] = fd
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	p.wait()
	for what, fd := range pidfds {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 10_000)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Errorf("%s still runs 10s after leaderrun was SIGKILLed", what)
			} else {
				t.Logf("measure: %s gone %v after SIGKILL of leaderrun", what, time.Since(killed).Round(100*time.Microsecond))
			}
			break
		}
	}
}
