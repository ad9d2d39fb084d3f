package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A log reader that goes away (`leaderrun … 2>&1 | head
// -c1`) must not end leaderrun: it still sweeps the child's leftovers,
// releases the lease and exits with the child's code.
func TestDeadLogReader(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			store := fileStore(t)
			errR, errW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			outR, outW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			inR, inW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			// The child leaves a process in its group, says its PID, then
			// exits when told to: after the log reader is gone.
			cmd := exec.Command(lrBin, "--log-format", format, "--name", "pipe", "--",
				"sh", "-c", `sleep 300 & echo $!; read x; exit 7`)
			cmd.Env = append(os.Environ(), "NO_COLOR=1", "LEADERRUN_STORE="+store)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			inR.Close()
			outW.Close()
			errW.Close()
			done := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(done) }()
			t.Cleanup(func() {
				select {
				case <-done:
				default:
					_ = cmd.Process.Kill()
					<-done
				}
			})
			line, err := bufio.NewReader(outR).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			leftover, _ := strconv.Atoi(strings.TrimSpace(line))
			// The first log line is out; then the reader goes away, like head -c1.
			if _, err := bufio.NewReader(errR).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			errR.Close()
			fmt.Fprintln(inW) // the child exits; leaderrun now logs into the dead pipe
			inW.Close()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("leaderrun did not exit in 60s")
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				t.Fatalf("leaderrun was killed by %v (%v)", ws.Signal(), waitErr)
			}
			if ws.ExitStatus() != 7 {
				t.Fatalf("leaderrun exited %d; want the child's 7", ws.ExitStatus())
			}
			if alive(leftover) {
				_ = syscall.Kill(leftover, syscall.SIGKILL)
				t.Fatalf("the leftover %d was not swept", leftover)
			}
			// The lease was released: the next instance gets it at once.
			if code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + store}, "--wait", "0", "--name", "pipe", "--", "true"); code != 0 {
				t.Fatalf("next instance: exit %d: %s", code, stderr)
			}
		})
	}
}

// A SIGCONT sent to leaderrun continues a child that was stopped, also
// without a terminal (cron, systemd, a script), where leaderrun catches
// SIGCONT only once the child has started.
func TestContinueStoppedChild(t *testing.T) {
	p := start(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "-v", "--name", "cont", "--",
		"sh", "-c", `echo ready; kill -STOP $$; echo continued`)
	if l := p.line(); l != "ready" {
		t.Fatalf("the child said %q; want ready", l)
	}
	waitStderr(t, p, "child stopped", 30*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if l := p.line(); l != "continued" {
		t.Fatalf("the child said %q; want continued (stderr: %s)", l, p.stderr.String())
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("leaderrun exited %d; want the child's 0 (stderr: %s)", code, p.stderr.String())
	}
}

// The child's own SIGPIPE stays the default although leaderrun catches it:
// a child writing into a closed pipe dies of SIGPIPE (exit 141), and its
// signal mask of ignored signals does not include SIGPIPE.
func TestChildSIGPIPEIsDefault(t *testing.T) {
	store := []string{"LEADERRUN_STORE=" + fileStore(t)}
	cmd := exec.Command(lrBin, "--name", "sigign", "--", "grep", "^SigIgn", "/proc/self/status")
	cmd.Env = append(os.Environ(), store...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("child said %q", out)
	}
	mask, err := strconv.ParseUint(f[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if mask&(1<<(uint(syscall.SIGPIPE)-1)) != 0 {
		t.Fatalf("the child starts with SIGPIPE ignored (SigIgn %s)", f[1])
	}

	// stdout is a pipe nobody reads: `yes` must die of SIGPIPE.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	p := exec.Command(lrBin, "--name", "yes", "--", "yes")
	p.Env = append(os.Environ(), append(store, "NO_COLOR=1")...)
	var stderr lockedBuffer
	p.Stdout, p.Stderr = w, &stderr
	err = p.Run()
	w.Close()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGPIPE) {
		t.Fatalf("leaderrun -- yes into a closed pipe: %v; want exit 141 (stderr %s)", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "yes was killed by SIGPIPE") {
		t.Fatalf("final line does not say the child died of SIGPIPE: %s", stderr.String())
	}
}

// Every forwarded signal reaches the child: HUP, QUIT, USR1, USR2 and
// WINCH are passed on while it runs, and TERM last, which it exits on.
// USR1 goes first: once the child has reported it, leaderrun supervises
// the child, and WINCH, caught once the child has started, is caught too.
// The loop's sleep runs in the background, where a non-interactive shell
// ignores QUIT (no core file), and the wait returns at each trapped signal.
func TestForwardsEverySignal(t *testing.T) {
	script := `for s in HUP QUIT USR1 USR2 WINCH; do trap "echo $s" $s; done; trap "echo TERM; exit 0" TERM
echo ready; while :; do sleep 1 & wait $!; done`
	p := start(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "--name", "forward", "--", "sh", "-c", script)
	if l := p.line(); l != "ready" {
		t.Fatalf("the child said %q; want ready", l)
	}
	for _, s := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGTERM} {
		if err := p.cmd.Process.Signal(s); err != nil {
			t.Fatal(err)
		}
		if l, want := p.line(), strings.TrimPrefix(unix.SignalName(s), "SIG"); l != want {
			t.Fatalf("sent %s, the child said %q (stderr: %s)", want, l, p.stderr.String())
		}
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("leaderrun exited %d; want the child's 0 (stderr: %s)", code, p.stderr.String())
	}
}

// A leaderrun run by the child is not configured by the
// outer lease: it takes its own lease instead of waiting on the outer one.
func TestNestedRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, lrBin, "--name", "outer", "--holder", "outer-holder", "--",
		"sh", "-c", lrBin+` -- printenv LEADERRUN_LEASE LEADERRUN_LEASE_HOLDER`)
	// The outer run configured by variables, as in a systemd unit.
	cmd.Env = append(os.Environ(), "LEADERRUN_STORE="+fileStore(t), "LEADERRUN_NAME=outer", "LEADERRUN_HOLDER=outer-holder")
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatal("the nested leaderrun deadlocked")
	}
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(f) != 2 || f[0] != "printenv" || f[1] == "outer-holder" {
		t.Fatalf("the inner child saw lease %q; want its own lease printenv with its own holder", f)
	}
}

// The fencing token under its new name and the deprecated one.
func TestChildTokenNames(t *testing.T) {
	cmd := exec.Command(lrBin, "--log-format", "json", "--name", "tok", "--", "sh", "-c", `echo "$LEADERRUN_LEASE_TOKEN $LEADERRUN_TOKEN"`)
	cmd.Env = append(os.Environ(), "LEADERRUN_STORE="+fileStore(t))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var acquired struct{ Token json.Number }
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "acquired") {
			_ = json.Unmarshal([]byte(l), &acquired)
		}
	}
	want := fmt.Sprintf("%s %s\n", acquired.Token, acquired.Token)
	if acquired.Token == "" || string(out) != want {
		t.Fatalf("child saw %q; want %q (stderr %s)", out, want, stderr.String())
	}
}

// Against a real Redis with an ACL user: the password leaderrun used
// does not reach the child, unless --pass-env keeps it.
func TestRedisCredentialsNotPassedOn(t *testing.T) {
	addr, _ := redisE2EPrivate(t)
	const pw = "s3cr3t-pw-7c1e"
	if got := redisE2ECLI(t, addr, "ACL", "SETUSER", "job", "on", ">"+pw, "~*", "&*", "+@all"); !strings.HasSuffix(got, "OK") {
		t.Fatalf("ACL SETUSER: %s", got)
	}
	childEnv := func(t *testing.T, env []string, args ...string) map[string]string {
		t.Helper()
		cmd := exec.Command(lrBin, append(args, "--name", "creds", "--", "env")...)
		cmd.Env = append(os.Environ(), append([]string{"NO_COLOR=1", "REDISCLI_AUTH=", "LEADERRUN_PASS_ENV="}, env...)...)
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
		if strings.Contains(stderr.String(), pw) {
			t.Fatalf("stderr shows the password: %s", stderr.String())
		}
		got := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				got[k] = v
			}
		}
		return got
	}
	t.Run("REDISCLI_AUTH", func(t *testing.T) {
		got := childEnv(t, []string{"LEADERRUN_STORE=redis://job@" + addr, "REDISCLI_AUTH=" + pw})
		if v, ok := got["REDISCLI_AUTH"]; ok && v != "" {
			t.Fatalf("child got REDISCLI_AUTH=%q", v)
		}
		if got["LEADERRUN_STORE"] != "redis://job@"+addr || got["LEADERRUN_LEASE"] != "creds" {
			t.Fatalf("child env lost the store URL or the lease: %v", got)
		}
		got = childEnv(t, []string{"LEADERRUN_STORE=redis://job@" + addr, "REDISCLI_AUTH=" + pw}, "--pass-env", "REDISCLI_AUTH")
		if got["REDISCLI_AUTH"] != pw {
			t.Fatalf("--pass-env REDISCLI_AUTH: child got %q", got["REDISCLI_AUTH"])
		}
	})
	t.Run("password in LEADERRUN_STORE", func(t *testing.T) {
		got := childEnv(t, []string{"LEADERRUN_STORE=redis://job:" + pw + "@" + addr})
		if v, ok := got["LEADERRUN_STORE"]; ok {
			t.Fatalf("child got LEADERRUN_STORE=%q", v)
		}
		got = childEnv(t, []string{"LEADERRUN_STORE=redis://job:" + pw + "@" + addr, "LEADERRUN_PASS_ENV=LEADERRUN_STORE"})
		if got["LEADERRUN_STORE"] == "" {
			t.Fatal("LEADERRUN_PASS_ENV=LEADERRUN_STORE did not keep it")
		}
	})
}

// Ctrl-\ (SIGQUIT) while waiting ends the wait like INT:
// exit 131, nothing started, the holder untouched.
func TestFileQuitWhileWaiting(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	leader, _ := holdLease(t, env, "quit", "--holder", "first")
	marker := t.TempDir() + "/started"
	waiter := start(t, env, "--name", "quit", "--", "touch", marker)
	waitStderr(t, waiter, "waiting for lease quit", 30*time.Second)
	_ = waiter.cmd.Process.Signal(syscall.SIGQUIT)
	if code := waiter.wait(); code != 128+int(syscall.SIGQUIT) {
		t.Fatalf("waiter exit %d; want 131 (stderr: %s)", code, waiter.stderr.String())
	}
	if strings.Contains(waiter.stderr.String(), "goroutine ") {
		t.Fatalf("SIGQUIT dumped goroutines: %s", waiter.stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the interrupted waiter started its child")
	}
	if code, out := statusJSON(t, env, "quit"); code != 0 || out["holder"] != "first" {
		t.Fatalf("status after the waiter left: %d %v", code, out)
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
}
