package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startHealthTest starts a checker whose OnFail delivers its error on the
// returned channel; the checker is stopped at cleanup.
func startHealthTest(t *testing.T, cfg HealthConfig) (*Health, <-chan error) {
	t.Helper()
	failed := make(chan error, 1)
	cfg.OnFail = func(err error) { failed <- err }
	h := StartHealth(context.Background(), cfg)
	t.Cleanup(h.Stop)
	return h, failed
}

func awaitFail(t *testing.T, failed <-chan error, within time.Duration) *HealthError {
	t.Helper()
	select {
	case err := <-failed:
		var he *HealthError
		if !errors.As(err, &he) || !errors.Is(err, ErrUnhealthy) {
			t.Fatalf("OnFail got %T %v; want a *HealthError that is ErrUnhealthy", err, err)
		}
		return he
	case <-time.After(within):
		t.Fatalf("the checker did not give up within %v", within)
		return nil
	}
}

// countLines counts the lines of a file the checks append to.
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// A check that passes twice and then fails: the checker gives up after
// exactly Retries failures in a row, with the exit code and the last line of
// the output (control characters replaced), and runs no check after that.
func TestHealthGivesUpAfterRetries(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// The third and later runs fail, printing two lines (the last with an
	// escape sequence) on stderr.
	cmd := `echo x >> "$RUNS"; n=$(wc -l < "$RUNS"); [ "$n" -le 2 ] && exit 0; printf 'first\nconn\033[31m refused %s\n' "$n" >&2; exit 7`
	_, failed := startHealthTest(t, HealthConfig{
		Cmd: cmd, Interval: 50 * time.Millisecond, Timeout: 2 * time.Second, Retries: 3,
		Env: append(os.Environ(), "RUNS="+runs),
	})
	he := awaitFail(t, failed, 20*time.Second)
	if he.Failures != 3 || he.Why != "exit code 7" {
		t.Fatalf("got %d failures, why %q; want 3, exit code 7", he.Failures, he.Why)
	}
	if want := "conn?[31m refused 5"; he.LastLine != want {
		t.Fatalf("last line %q; want %q", he.LastLine, want)
	}
	if got := countLines(t, runs); got != 5 {
		t.Fatalf("%d checks ran; want 5 (2 passed, 3 failed)", got)
	}
	// The error names the check by its program only.
	if msg := he.Error(); strings.Contains(msg, "RUNS") || !strings.HasPrefix(msg, "health check (echo …) failed 3 times in a row") {
		t.Fatalf("message %q", msg)
	}
	time.Sleep(300 * time.Millisecond) // nothing to await: checking that no check runs
	if got := countLines(t, runs); got != 5 {
		t.Fatalf("%d checks ran after giving up; want none", got-5)
	}
}

// A check that hangs is killed with its whole process group at the timeout
// and counts as a failure; checks never overlap.
func TestHealthTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	pids := filepath.Join(dir, "pids")
	// Each check logs its start, leaves a background sleeper in its group,
	// and hangs; an overlap would show as two starts without an end between.
	cmd := `echo start >> "$LOG"; sleep 300 & echo $! >> "$PIDS"; sleep 300; echo end >> "$LOG"`
	timeout := 300 * time.Millisecond
	begin := time.Now()
	_, failed := startHealthTest(t, HealthConfig{
		Cmd: cmd, Interval: timeout, Timeout: timeout, Retries: 2,
		Env: append(os.Environ(), "LOG="+log, "PIDS="+pids),
	})
	he := awaitFail(t, failed, 20*time.Second)
	if took := time.Since(begin); took < 2*timeout+2*timeout {
		t.Fatalf("gave up after %v; two intervals and two timeouts take at least %v", took, 4*timeout)
	}
	if !strings.HasPrefix(he.Why, "timed out after 300ms") || he.Failures != 2 {
		t.Fatalf("why %q, %d failures; want a timeout, 2 failures", he.Why, he.Failures)
	}
	if b, _ := os.ReadFile(log); string(b) != "start\nstart\n" {
		t.Fatalf("check log %q; want two starts, no end (killed), no overlap", b)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		deadline := time.Now().Add(5 * time.Second)
		for syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("the check's background process %d survived the kill", pid)
			}
			time.Sleep(5 * time.Millisecond) // the kernel gives no event for another's death
		}
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// Failures during the start period do not count until a check passes;
// after the period they do.
func TestHealthStartPeriod(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	start := time.Now()
	period := 600 * time.Millisecond
	_, failed := startHealthTest(t, HealthConfig{
		Cmd: `echo x >> "$RUNS"; exit 1`, Interval: 50 * time.Millisecond, Timeout: time.Second,
		StartPeriod: period, Retries: 2, Env: append(os.Environ(), "RUNS="+runs),
	})
	awaitFail(t, failed, 20*time.Second)
	if took := time.Since(start); took < period {
		t.Fatalf("gave up after %v, within the start period %v", took, period)
	}
	if n := countLines(t, runs); n < 3 {
		t.Fatalf("%d checks; want the start period's failures and then 2 counted ones", n)
	}
}

// A check that passed ends the start period: the next failures count at once.
func TestHealthStartPeriodEndsOnPass(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	_, failed := startHealthTest(t, HealthConfig{
		Cmd: `echo x >> "$RUNS"; [ "$(wc -l < "$RUNS")" -le 1 ]`, Interval: 50 * time.Millisecond, Timeout: time.Second,
		StartPeriod: time.Hour, Retries: 2, Env: append(os.Environ(), "RUNS="+runs),
	})
	awaitFail(t, failed, 20*time.Second)
	if n := countLines(t, runs); n != 3 {
		t.Fatalf("%d checks; want 3 (one pass, two counted failures)", n)
	}
}

// Stop kills a running check and waits; OnFail is never called.
func TestHealthStopKillsRunningCheck(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	h, failed := startHealthTest(t, HealthConfig{
		Cmd: `echo $$ > "$STARTED"; exec sleep 300`, Interval: 10 * time.Millisecond, Timeout: time.Hour,
		Retries: 1, Env: append(os.Environ(), "STARTED="+started),
	})
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 {
		b, _ := os.ReadFile(started)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("the check did not start")
		}
		time.Sleep(5 * time.Millisecond) // the file is the only sign of the start
	}
	h.Stop()
	if syscall.Kill(pid, 0) == nil && !zombie(pid) {
		t.Fatalf("check %d still runs after Stop", pid)
	}
	select {
	case err := <-failed:
		t.Fatalf("OnFail called after Stop: %v", err)
	default:
	}
	if h.Err() != nil {
		t.Fatalf("Err() = %v after Stop", h.Err())
	}
}

func TestPrintableLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x1b[31mb", "a?[31mb"},
		{"bad\xffutf", "bad?utf"},
		{strings.Repeat("é", 100), strings.Repeat("é", 80) + "…"},
	} {
		if got := printableLine(tc.in, healthLineMax); got != tc.want {
			t.Errorf("printableLine(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// The gate before a check in a process group only: the command runs once
// the gate is opened, never when it ends unopened (leaderrun died before
// the guard knew the check's group), and without the gate's descriptor.
func TestCheckGate(t *testing.T) {
	for _, open := range []bool{true, false} {
		marker := filepath.Join(t.TempDir(), "ran")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", checkGate+`[ ! -e /proc/self/fd/3 ] && touch "$0"`, marker)
		cmd.ExtraFiles = []*os.File{r}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if open {
			w.Write([]byte("\n"))
		}
		w.Close()
		err = cmd.Wait()
		_, statErr := os.Stat(marker)
		switch {
		case open && (err != nil || statErr != nil):
			t.Fatalf("opened gate: %v, marker %v; want the command run without descriptor 3", err, statErr)
		case !open && (cmd.ProcessState.ExitCode() != 125 || statErr == nil):
			t.Fatalf("gate ended unopened: exit %d, marker %v; want 125 and the command not run", cmd.ProcessState.ExitCode(), statErr)
		}
	}
}
