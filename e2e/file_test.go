package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// 20 instances started at once on one name, all waiting: every one runs,
// never two at a time, and tokens strictly increase in run order.
func TestFileManyInstancesNoOverlap(t *testing.T) {
	runCrowd(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "crowd", 20, "sleep 0.02")
}

// holdLease starts a leader whose child prints "ready PID" and then sleeps
// until killed; it returns the leader and the child's PID.
func holdLease(t *testing.T, env []string, name string, extra ...string) (*lr, int) {
	t.Helper()
	args := append(append([]string{"--name", name}, extra...), "--", "sh", "-c", `echo "ready $$"; exec sleep 300`)
	p := start(t, env, args...)
	f := strings.Fields(p.line())
	if len(f) != 2 || f[0] != "ready" {
		t.Fatalf("leader's child said %q", f)
	}
	pid, _ := strconv.Atoi(f[1])
	return p, pid
}

// --wait 0 against a held lease: exit 75 (or --conflict-exit-code), the
// child never starts, and the final line names the holder.
func TestFileNoWaitConflict(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	leader, _ := holdLease(t, env, "busy", "--holder", "the-leader")
	marker := filepath.Join(t.TempDir(), "started")
	for i := 0; i < 10; i++ {
		code, stderr := runLR(t, env, "--wait", "0", "--name", "busy", "--", "touch", marker)
		if code != 75 {
			t.Fatalf("attempt %d: exit %d; want 75 (stderr: %s)", i, code, stderr)
		}
		if !strings.Contains(stderr, "the-leader") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("attempt %d: want one stderr line naming the holder, got %q", i, stderr)
		}
	}
	if code, stderr := runLR(t, env, "-q", "--no-wait", "--conflict-exit-code", "0", "--name", "busy", "--", "touch", marker); code != 0 || stderr != "" {
		t.Fatalf("-q --no-wait --conflict-exit-code 0: exit %d, stderr %q; want 0 and silence (cron)", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a conflicting instance started its child")
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	if code := leader.wait(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("leader after SIGTERM forwarded to sleep: exit %d; want 143", code)
	}
}

// A clean exit hands the lease over: the waiter runs right after.
func TestFileCleanHandover(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	marks := filepath.Join(t.TempDir(), "marks")
	first := start(t, env, append([]string{"--name", "hand"}, markChild(marks, "sleep 0.3")...)...)
	// The second waits; once the first exits it must take over.
	second := start(t, env, append([]string{"--name", "hand", "--wait", "30s"}, markChild(marks, "true")...)...)
	if c := first.wait(); c != 0 {
		t.Fatalf("first: exit %d: %s", c, first.stderr.String())
	}
	if c := second.wait(); c != 0 {
		t.Fatalf("second: exit %d: %s", c, second.stderr.String())
	}
	if runs := checkMarks(t, marks); runs != 2 {
		t.Fatalf("%d runs; want 2", runs)
	}
}

// The lock file replaced under a running leader: the child is stopped and
// leaderrun exits 124 saying leadership was lost.
func TestFileLockReplacedStopsChild(t *testing.T) {
	dir := t.TempDir()
	env := []string{"LEADERRUN_STORE=file://" + dir}
	leader, child := holdLease(t, env, "victim", "--renew-every", "100ms")
	path := filepath.Join(dir, "victim.lock")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	if code := leader.wait(); code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, leader.stderr.String())
	}
	if last := leader.lastLine(); !strings.Contains(last, "lost") || !strings.Contains(last, "replaced") {
		t.Fatalf("final line %q does not say the lease was lost because the file was replaced", last)
	}
	waitGone(t, child, time.Second)
}

// SIGTERM while waiting: leaderrun exits promptly, starts nothing and leaves
// the holder alone.
func TestFileSignalWhileWaiting(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	leader, _ := holdLease(t, env, "queue", "--holder", "first")
	marker := filepath.Join(t.TempDir(), "started")
	waiter := start(t, env, "--name", "queue", "--", "touch", marker)
	// The waiter announces that it waits; then it gets SIGTERM.
	waitStderr(t, waiter, "waiting", 30*time.Second)
	_ = waiter.cmd.Process.Signal(syscall.SIGTERM)
	if code := waiter.wait(); code != 143 {
		t.Fatalf("waiter exit %d; want 143 (stderr: %s)", code, waiter.stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the interrupted waiter started its child")
	}
	code, out := statusJSON(t, env, "queue")
	if code != 0 || out["holder"] != "first" {
		t.Fatalf("status after the waiter left: %d %v", code, out)
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
}

// leaderrun SIGKILLed: its child dies with it, and the next instance takes
// over at once (the kernel dropped the flock).
func TestFileLeaderKilled(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	leader, child := holdLease(t, env, "crash")
	_ = leader.cmd.Process.Kill()
	leader.wait()
	waitGone(t, child, time.Second)
	if code, stderr := runLR(t, env, "--wait", "0", "--name", "crash", "--", "true"); code != 0 {
		t.Fatalf("takeover after the leader was killed: exit %d: %s", code, stderr)
	}
}

func statusJSON(t *testing.T, env []string, name string) (int, map[string]any) {
	t.Helper()
	cmd := exec.Command(lrBin, "status", "--json", name)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("status --json printed %q: %v", out, err)
	}
	return code, m
}

func TestFileStatus(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	if code, m := statusJSON(t, env, "st"); code != 4 || m["held"] != false || m["unknown"] != true {
		t.Fatalf("status of a lease never used: %d %v; want 4, held=false, unknown=true", code, m)
	}
	leader, _ := holdLease(t, env, "st", "--holder", "web-2:4411")
	code, m := statusJSON(t, env, "st")
	if code != 0 || m["held"] != true || m["holder"] != "web-2:4411" || m["token"] == nil || m["since"] == nil {
		t.Fatalf("status while held: %d %v", code, m)
	}
	cmd := exec.Command(lrBin, "status", "st")
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.Output()
	if !strings.HasPrefix(string(out), "st: held by web-2:4411 since ") || !strings.Contains(string(out), "token") {
		t.Fatalf("status text = %q", out)
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
}

// stdout belongs to the child: nothing of leaderrun's goes there.
func TestStdoutIsTheChilds(t *testing.T) {
	cmd := exec.Command(lrBin, "-v", "--", "echo", "hello")
	cmd.Env = append(os.Environ(), "LEADERRUN_STORE="+fileStore(t))
	out, err := cmd.Output()
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("stdout = %q, %v; want exactly the child's hello", out, err)
	}
}

// The child's environment carries the lease name, holder and token, and
// not leaderrun's own configuration variables for them.
func TestChildEnvironment(t *testing.T) {
	cmd := exec.Command(lrBin, "--holder", "me", "--name", "envjob", "--", "sh", "-c", `echo "$LEADERRUN_LEASE $LEADERRUN_LEASE_HOLDER $LEADERRUN_LEASE_TOKEN ${LEADERRUN_NAME-unset} ${LEADERRUN_HOLDER-unset}"`)
	cmd.Env = append(os.Environ(), "LEADERRUN_STORE="+fileStore(t))
	out, err := cmd.Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 5 || f[0] != "envjob" || f[1] != "me" || f[3] != "unset" || f[4] != "unset" {
		t.Fatalf("child saw %q, %v; want \"envjob me TOKEN unset unset\"", out, err)
	}
	if tok, err := strconv.ParseUint(f[2], 10, 64); err != nil || tok == 0 || tok >= 1<<53 {
		t.Fatalf("LEADERRUN_LEASE_TOKEN %q: want a decimal integer in [1, 2^53)", f[2])
	}
}

// Bad input of every kind: one clear stderr line, the documented code, no child.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "metrics.prom")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	touch := []string{"--", "touch", marker}
	tests := []struct {
		name string
		args []string
		env  []string
		code int
		says string
	}{
		{"no command", []string{"--name", "x"}, nil, 125, "no command"},
		{"nothing after --", []string{"--"}, nil, 125, "no command"},
		{"unknown flag", append([]string{"--frobnicate"}, touch...), nil, 125, "frobnicate"},
		{"bad store URL", append([]string{"--store", "ftp://example"}, touch...), nil, 125, "unknown scheme"},
		{"store not a URL", append([]string{"--store", "/tmp/dir"}, touch...), nil, 125, "is not a URL"},
		{"relative file store", append([]string{"--store", "file://relative/dir"}, touch...), nil, 125, "file:///"},
		{"empty store variable", touch, []string{"LEADERRUN_STORE="}, 125, "LEADERRUN_STORE is set but empty"},
		{"blank store variable", touch, []string{"LEADERRUN_STORE= "}, 125, "LEADERRUN_STORE is set but empty"},
		{"once-per-zone alone", append([]string{"--once-per-zone", "Europe/Berlin"}, touch...), nil, 125, "--once-per-zone needs --once-per"},
		{"once-per-any alone, from its variable", touch, []string{"LEADERRUN_ONCE_PER_ANY=true"}, 125, "LEADERRUN_ONCE_PER_ANY (--once-per-any) needs --once-per"},
		{"once-per-exit-code alone", append([]string{"--once-per-exit-code", "0"}, touch...), nil, 125, "--once-per-exit-code needs --once-per"},
		{"misspelt once-per variable", touch, []string{"LEADERRUN_ONCE_PR=day"}, 125, "did you mean LEADERRUN_ONCE_PER?"},
		{"listen without a port", append([]string{"--listen", "8080"}, touch...), nil, 125, "want HOST:PORT, :PORT (127.0.0.1) or unix:PATH"},
		{"listen port out of range, from its variable", touch, []string{"LEADERRUN_LISTEN=:70000"}, 125, "the port must be a number from 0 to 65535"},
		{"metrics file a FIFO", append([]string{"--metrics-file", fifo}, touch...), nil, 125, "is not a regular file"},
		{"metrics file a device", append([]string{"--metrics-file", "/dev/zero"}, touch...), nil, 125, "is not a regular file"},
		{"history --since 0s", []string{"history", "--since", "0s", "job"}, nil, 125, "--since 0s: want a positive duration"},
		{"history --since -1h", []string{"history", "--since", "-1h", "job"}, nil, 125, "--since -1h: want a positive duration"},
		{"bad ttl", append([]string{"--ttl", "soon"}, touch...), nil, 125, "ttl"},
		{"zero ttl", append([]string{"--ttl", "0s"}, touch...), nil, 125, "--ttl"},
		{"bad ttl from env", touch, []string{"LEADERRUN_TTL=forever"}, 125, "ttl"},
		{"unsafe timing", append([]string{"--ttl", "5s", "--grace", "4s"}, touch...), nil, 125, "--grace ≤"},
		{"unsafe renew", append([]string{"--ttl", "15s", "--renew-every", "14s"}, touch...), nil, 125, "--renew-every ≤"},
		{"bad wait", append([]string{"--wait", "a while"}, touch...), nil, 125, "--wait"},
		{"bad stop signal", append([]string{"--stop-signal", "KILL"}, touch...), nil, 125, "--stop-signal"},
		{"bad name", append([]string{"--name", "../etc"}, touch...), nil, 125, "bad name"},
		{"bad conflict code", append([]string{"--conflict-exit-code", "300"}, touch...), nil, 125, "0-255"},
		{"bad log format", append([]string{"--log-format", "xml"}, touch...), nil, 125, "--log-format"},
		{"flag after command word", []string{"touch", marker, "--", "x"}, nil, 125, "before --"},
		{"command not found", []string{"--", "no-such-command-xyz"}, nil, 127, "not found"},
		{"command not executable", []string{"--", notExec}, nil, 126, "not executable"},
		{"directory as command", []string{"--", dir}, nil, 126, "not executable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"LEADERRUN_STORE=" + fileStore(t)}, tc.env...)
			if strings.Contains(tc.name, "store") {
				env = tc.env
			}
			code, stderr := runLR(t, env, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d; want %d (stderr %q)", code, tc.code, stderr)
			}
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.says) {
				t.Errorf("stderr %q; want one line saying %q", stderr, tc.says)
			}
			if _, err := os.Stat(marker); err == nil {
				os.Remove(marker)
				t.Errorf("the child was started")
			}
		})
	}
}

// --log-format json: every stderr line is a JSON object; the last says how it ended.
func TestJSONLogs(t *testing.T) {
	code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "--log-format", "json", "--name", "json", "--", "sh", "-c", "exit 7")
	if code != 7 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var last map[string]any
	for _, l := range lines {
		last = nil
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", l, err)
		}
	}
	if last["event"] != "child_exited" || last["exit_code"] != float64(7) {
		t.Fatalf("last line %v; want event child_exited, exit_code 7", last)
	}
}

// watch prints the free state, then each new holder with its token.
func TestFileWatch(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	w := start(t, env, "watch", "--interval", "20ms", "w")
	if l := w.line(); !strings.HasSuffix(l, "w: free") {
		t.Fatalf("first watch line %q; want free", l)
	}
	leader, _ := holdLease(t, env, "w", "--holder", "alpha")
	_, st := statusJSON(t, env, "w")
	if l := w.line(); !strings.HasSuffix(l, fmt.Sprintf("w: held by alpha, token %.0f", st["token"])) {
		t.Fatalf("watch line %q; want held by alpha, token %.0f", l, st["token"])
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
	if l := w.line(); !strings.HasSuffix(l, "w: free") {
		t.Fatalf("watch line %q after release; want free", l)
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	if code := w.wait(); code != 0 {
		t.Fatalf("watch exit %d after SIGTERM; want 0", code)
	}
}

// -v says which store a run uses: the default file store by name (it
// excludes only this host), any other by its URL with the password masked.
func TestVerboseNamesTheStore(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	_, stderr := runLR(t, []string{"HOME=" + home, "XDG_STATE_HOME=" + home}, "-v", "--name", "vstore", "--", "true")
	if !strings.Contains(stderr, "store: the default file store, which excludes only this host's processes") {
		t.Errorf("-v on the default store: stderr %q does not name the store", stderr)
	}
	store := fileStore(t)
	_, stderr = runLR(t, nil, "-v", "--store", store, "--name", "vstore", "--", "true")
	if !strings.Contains(stderr, "store url="+store) {
		t.Errorf("-v with --store: stderr %q does not name %s", stderr, store)
	}
}

// A lock file whose counter is 30 days ahead of the clock (any user of a
// shared directory can write one): --once-per day refuses in one line,
// exit 125, and starts nothing, run after run. (It ran on every tick, the
// token deciding a period 30 days ahead, and the runs vanished from
// history as "from the future".)
func TestFileCounterAheadRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ahead := time.Now().Add(30 * 24 * time.Hour).UnixMicro()
	if err := os.WriteFile(filepath.Join(dir, "daily.lock"), []byte(fmt.Sprintf(`{"name":"daily","token":%d,"held":false}`+"\n", ahead)), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	for range 2 {
		code, stderr := runLR(t, []string{"LEADERRUN_STORE=file://" + dir}, "--once-per", "day", "--name", "daily", "--", "touch", marker)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != 125 || len(lines) != 1 || !strings.Contains(stderr, "ahead of the store's clock") {
			t.Fatalf("exit %d, %q; want 125 and one line saying the counter is ahead", code, stderr)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran")
	}
}
