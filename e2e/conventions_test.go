package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sigIgnored reports whether pid has sig ignored (SigIgn in its status).
func sigIgnored(t *testing.T, pid int, sig syscall.Signal) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return mask&(1<<(sig-1)) != 0
		}
	}
	t.Fatalf("no SigIgn for %d", pid)
	return false
}

// pidFromFile waits until path holds a PID (written by the child) and
// returns it with its parent's PID: leaderrun.
func pidFromFile(t *testing.T, path string) (child, parent int) {
	t.Helper()
	deadline := time.Now().Add(ttyWait)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if s := strings.TrimSpace(string(b)); strings.HasSuffix(string(b), "\n") && s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			st, ok := ttyProcStat(pid)
			if !ok {
				t.Fatalf("child %d is gone", pid)
			}
			return pid, st.ppid
		}
		time.Sleep(5 * time.Millisecond) // a file the child writes: no event to await
	}
	t.Fatalf("no PID in %s after %v", path, ttyWait)
	return 0, 0
}

// `nohup leaderrun … &` in a terminal survives the terminal's hangup, as
// `nohup sleep &` does: the SIGHUP ignored by nohup stays ignored for
// leaderrun and its child (it once killed the child: exit 129).
func TestNohupSurvivesHangup(t *testing.T) {
	sh := startTTYShell(t)
	dir := t.TempDir()
	pidf, out := filepath.Join(dir, "child"), filepath.Join(dir, "out")
	sh.run(`nohup $LR -- sh -c 'echo $$ > ` + pidf + `; exec sleep 300' > ` + out + ` 2>&1 &`)
	child, lr := pidFromFile(t, pidf)
	for _, pid := range []int{lr, child} {
		if !sigIgnored(t, pid, syscall.SIGHUP) {
			t.Fatalf("process %d does not ignore SIGHUP", pid)
		}
	}
	// The terminal goes away: bash gets SIGHUP and sends it to its jobs.
	if err := syscall.Kill(sh.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	err := <-sh.waited
	sh.waited <- err // for the cleanup
	if !alive(lr) || !alive(child) {
		t.Fatal("leaderrun or its child died with the terminal's hangup")
	}
	// A SIGTERM still stops it, forwarded as usual: exit 143, not 129.
	if err := syscall.Kill(lr, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitGone(t, lr, ttyWait)
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "SIGTERM") || !strings.Contains(string(b), "143") || strings.Contains(string(b), "SIGHUP") {
		t.Fatalf("leaderrun's output %q; want the child killed by the forwarded SIGTERM (143)", b)
	}
}

// A non-interactive shell starts a background job with SIGINT ignored; a
// Ctrl-C meant for the script does not stop `leaderrun … &`, nor its child.
func TestBackgroundJobKeepsSIGINTIgnored(t *testing.T) {
	dir := t.TempDir()
	pidf := filepath.Join(dir, "child")
	cmd := exec.Command("bash", "-c", lrBin+` --store `+fileStore(t)+` --name bg -- sh -c 'echo $$ > `+pidf+`; exec sleep 300' & wait $!`)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var kill []int // what the test started, by PID, if it fails half-way
	t.Cleanup(func() {
		for _, pid := range append(kill, cmd.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	child, lr := pidFromFile(t, pidf)
	kill = []int{child, lr}
	for _, pid := range []int{lr, child} {
		if !sigIgnored(t, pid, syscall.SIGINT) {
			t.Fatalf("process %d does not ignore SIGINT", pid)
		}
	}
	if err := syscall.Kill(lr, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(lr, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-time.After(ttyWait):
		t.Fatalf("bash still waits for leaderrun %v after the signals: %s", ttyWait, stderr.String())
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 143 {
		t.Fatalf("bash's wait gave %v; want 143 (the SIGTERM, the SIGINT ignored): %s", err, stderr.String())
	}
}

// A run started inside a run of the same lease (same store, same explicit
// name) would wait for its own parent, forever under the default --wait: it
// is refused at once with one line and 125. A --wait asks to wait anyway;
// another name, or another store, is no nesting.
func TestNestedSameLeaseRefused(t *testing.T) {
	store := fileStore(t)
	marker := filepath.Join(t.TempDir(), "inner-ran")
	inner := lrBin + " --store " + store + " --name x -- touch " + marker
	code, stderr := runLR(t, nil, "--store", store, "--name", "x", "--", "sh", "-c", inner)
	if code != 125 {
		t.Fatalf("exit %d; want the inner run's 125: %s", code, stderr)
	}
	if !strings.Contains(stderr, "already running inside lease x (token ") {
		t.Fatalf("stderr %q; want it to say the run is inside lease x", stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the inner child ran")
	}
	// --wait: waits as asked, and gives up as any waiter does.
	code, stderr = runLR(t, nil, "--store", store, "--name", "x", "--", "sh", "-c", lrBin+" --store "+store+" --name x --wait 100ms -- true")
	if code != 75 {
		t.Fatalf("with --wait: exit %d; want 75: %s", code, stderr)
	}
	// Another store: no nesting.
	code, stderr = runLR(t, nil, "--store", store, "--name", "x", "--", "sh", "-c", lrBin+" --store "+fileStore(t)+" --name x -- touch "+marker)
	if code != 0 {
		t.Fatalf("another store: exit %d: %s", code, stderr)
	}
}

// A misspelt variable is not silently ignored: one warning with the nearest
// name, and the run goes on (it was never a configuration error before).
func TestMisspeltVariableWarned(t *testing.T) {
	code, stderr := runLR(t, []string{"LEADERRUN_TLL=5s"}, "--store", fileStore(t), "--name", "typo", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "LEADERRUN_TLL is not a leaderrun variable and is ignored; did you mean LEADERRUN_TTL?"); n != 1 {
		t.Fatalf("stderr %q; want the warning once", stderr)
	}
}

// On a terminal, leaderrun's own line starts on a fresh line even after
// child output without a final newline (it stuck to it: "no newlineleaderrun:
// …"): as many spaces as the terminal is wide, then a carriage return, wrap
// to the next line only when the cursor is not at its start.
func TestFreshLineOnTerminal(t *testing.T) {
	sh := startTTYShell(t)
	if err := unix.IoctlSetWinsize(int(sh.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 40}); err != nil {
		t.Fatal(err)
	}
	out := sh.run(`$LR -- printf 'no newline'`)
	sh.exit()
	i := strings.Index(out, "no newline")
	j := strings.Index(out, "leaderrun: printf exited with code 0")
	if i < 0 || j < i {
		t.Fatalf("output %q: no child output followed by the final line", out)
	}
	between := out[i+len("no newline") : j]
	if between != strings.Repeat(" ", 40)+"\r" {
		t.Fatalf("between the child's output and leaderrun's line: %q; want 40 spaces and a carriage return", between)
	}
}

// watch stopped by Ctrl-C leaves the shell's prompt on a fresh line, not
// after the echoed ^C.
func TestWatchCtrlCFreshLine(t *testing.T) {
	sh := startTTYShell(t)
	if err := unix.IoctlSetWinsize(int(sh.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 30}); err != nil {
		t.Fatal(err)
	}
	sh.typeLine(lrBin + " watch --store " + sh.store + " w")
	sh.expect("w: free")
	sh.term.Send("\x03")
	out := sh.expect(ttyPrompt)
	sh.exit()
	if !strings.Contains(out, "^C"+strings.Repeat(" ", 30)+"\r") {
		t.Fatalf("after Ctrl-C: %q; want the ^C followed by a fresh line for the prompt", out)
	}
}
