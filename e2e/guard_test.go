package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/runner"
)

// Black-box tests of the guard process (docs/design.md, safety rules 14-15): the child's tree
// never outlives the lease, even when leaderrun itself is SIGKILLed or
// frozen, or the child leaves its process group.

// treeChild is a child that starts two background sleeps (and, with daemon,
// a third that calls setsid and so leaves the process group), prints
// "pids P1 P2 [P3]" and waits.
func treeChild(daemon bool) []string {
	s := `sleep 300 & a=$!; sleep 300 & b=$!; `
	if daemon {
		// The daemon says its PID once it has left the group (a fifo, so
		// the child waits for that event).
		s += `f=$(mktemp -u); mkfifo "$f"; setsid sh -c "echo \$\$ > $f; exec sleep 300 </dev/null >/dev/null 2>&1" & read c < "$f"; rm -f "$f"; ` +
			`echo "pids $$ $a $b $c"; wait $a`
	} else {
		s += `echo "pids $$ $a $b"; wait`
	}
	return []string{"sh", "-c", s}
}

// treePIDs reads the "pids ..." line of a treeChild. It also waits until
// leaderrun has told its guard the child's process group (leaderrun logs
// "child started" at -v right after): a SIGKILL of leaderrun in the instant
// between the child's exec and that message leaves the tree to Pdeathsig in
// --contain group mode (README: What escapes).
func treePIDs(t *testing.T, p *lr) []int {
	t.Helper()
	if strings.Contains(strings.Join(p.cmd.Args, " "), " -v ") {
		waitStderr(t, p, "child started", 10*time.Second)
	}
	f := strings.Fields(p.line())
	if len(f) < 3 || f[0] != "pids" {
		t.Fatalf("child said %q", f)
	}
	var pids []int
	for _, s := range f[1:] {
		pid, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	return pids
}

// overlapProbe is a child that writes to out "overlap PID" for each of pids
// still running (not a zombie) when it starts, then "started".
func overlapProbe(out string, pids []int) []string {
	var ps []string
	for _, p := range pids {
		ps = append(ps, strconv.Itoa(p))
	}
	return []string{"sh", "-c", `for p in ` + strings.Join(ps, " ") + `; do
		s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ] && echo "overlap $p"; done >> ` + out + `; echo started >> ` + out}
}

// probeSaw waits for the waiter running overlapProbe and returns what it wrote.
func probeSaw(t *testing.T, waiter *lr, out string) string {
	t.Helper()
	if c := waiter.wait(); c != 0 {
		t.Fatalf("waiter exit %d: %s", c, waiter.stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// guardPID reads the guard's PID from leaderrun's -v log.
func guardPID(t *testing.T, p *lr) int {
	t.Helper()
	waitStderr(t, p, "guard_pid=", 10*time.Second)
	s := p.stderr.String()
	i := strings.Index(s, "guard_pid=")
	f := strings.FieldsFunc(s[i+len("guard_pid="):], func(r rune) bool { return r < '0' || r > '9' })
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func guardStores(t *testing.T) map[string][]string {
	_, redisEnv := redisE2EShared(t)
	_, az := azShared(t, "poll=200ms")
	return map[string][]string{
		"file":    {"LEADERRUN_STORE=" + fileStore(t)},
		"redis":   redisEnv,
		"azurite": append(azEnv(azDevKey), "LEADERRUN_STORE="+az),
	}
}

// leaderrun SIGKILLed: every process of the child's tree is gone within 1 s,
// on every store and in both containment modes.
func TestGuardLeaderKilledTreeGone(t *testing.T) {
	t.Parallel()
	for store, env := range guardStores(t) {
		for _, contain := range []string{"group", "auto"} {
			t.Run(store+"/"+contain, func(t *testing.T) {
				t.Parallel()
				p := start(t, env, "-v", "--contain", contain, "--name", e2eName(t, "guard-kill"), "--", treeChild(false)[0], treeChild(false)[1], treeChild(false)[2])
				pids := treePIDs(t, p)
				gpid := guardPID(t, p)
				// Every store's guard is leaderrun's own, smallest program.
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", gpid)); err != nil || exe != lrBin {
					t.Errorf("the guard runs %q (%v); want leaderrun's own program %s", exe, err, lrBin)
				}
				_ = p.cmd.Process.Kill()
				killed := time.Now()
				p.wait()
				var last time.Time
				for _, pid := range pids {
					if at := waitGone(t, pid, time.Second); at.After(last) {
						last = at
					}
				}
				t.Logf("measure: %s/%s: last tree process gone %v after SIGKILL of leaderrun",
					store, contain, last.Sub(killed).Round(100*time.Microsecond))
				waitGone(t, gpid, 5*time.Second)
			})
		}
	}
}

// On the file store the kernel drops a dead holder's lock at once; the guard's
// duplicate of the lock descriptor keeps it until the tree is gone, so a
// waiting instance never starts while an orphan of the old holder runs.
func TestGuardFileNoOverlapAfterLeaderKilled(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	for i := range 20 {
		leader := start(t, env, "-v", "--contain", "group", "--name", "orphans", "--", treeChild(false)[0], treeChild(false)[1], treeChild(false)[2])
		pids := treePIDs(t, leader)
		out := filepath.Join(t.TempDir(), "probe")
		probe := overlapProbe(out, pids)
		waiter := start(t, env, "-v", "--contain", "group", "--name", "orphans", "--wait", "30s", "--", probe[0], probe[1], probe[2])
		waitStderr(t, waiter, "waiting", 10*time.Second)
		_ = leader.cmd.Process.Kill()
		leader.wait()
		if saw := probeSaw(t, waiter, out); saw != "started" {
			t.Fatalf("trial %d: the waiter's child started while the old tree still ran: %s", i, saw)
		}
	}
}

// A daemon that called setsid: with a cgroup it is dead before the lease is
// released (after SIGTERM to leaderrun, after SIGKILL of leaderrun, and on
// lease loss); with --contain group it escapes, as the README says.
func TestGuardSetsidDaemon(t *testing.T) {
	t.Parallel()
	cg, err := runner.NewCgroup()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup containment on this machine: %v", err)
		}
		t.Skipf("no cgroup containment here: %v", err)
	}
	parent := filepath.Dir(cg.Path())
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, end := range []string{"sigterm", "sigkill"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			env := []string{"LEADERRUN_STORE=" + fileStore(t)}
			leader := start(t, env, "-v", "--contain", "cgroup", "--name", "daemon", "--", treeChild(true)[0], treeChild(true)[1], treeChild(true)[2])
			pids := treePIDs(t, leader)
			out := filepath.Join(t.TempDir(), "probe")
			probe := overlapProbe(out, pids)
			waiter := start(t, env, "-v", "--name", "daemon", "--wait", "30s", "--", probe[0], probe[1], probe[2])
			waitStderr(t, waiter, "waiting", 10*time.Second)
			sig := syscall.SIGTERM
			if end == "sigkill" {
				sig = syscall.SIGKILL
			}
			_ = leader.cmd.Process.Signal(sig)
			leader.wait()
			if saw := probeSaw(t, waiter, out); saw != "started" {
				t.Fatalf("the waiter's child saw %q: the setsid daemon outlived the lease", saw)
			}
			noCgroupLeft(t, parent, leader.cmd.Process.Pid)
		})
	}
	t.Run("lost", func(t *testing.T) {
		t.Parallel()
		_, env := redisE2EShared(t)
		addr := strings.TrimPrefix(env[0], "LEADERRUN_STORE=redis://")
		name := e2eName(t, "daemon")
		leader := start(t, env, "-v", "--contain", "cgroup", "--ttl", "3s", "--name", name, "--", treeChild(true)[0], treeChild(true)[1], treeChild(true)[2])
		pids := treePIDs(t, leader)
		redisE2ECLI(t, addr, "DEL", "leaderrun:{"+name+"}")
		if c := leader.wait(); c != 124 {
			t.Fatalf("exit %d; want 124: %s", c, leader.stderr.String())
		}
		for _, pid := range pids {
			if alive(pid) {
				t.Fatalf("process %d of the tree outlived the lost lease (daemon %d)", pid, pids[len(pids)-1])
			}
		}
		noCgroupLeft(t, parent, leader.cmd.Process.Pid)
	})
	t.Run("group-escapes", func(t *testing.T) {
		t.Parallel()
		env := []string{"LEADERRUN_STORE=" + fileStore(t)}
		leader := start(t, env, "-v", "--contain", "group", "--name", "daemon", "--", treeChild(true)[0], treeChild(true)[1], treeChild(true)[2])
		pids := treePIDs(t, leader)
		_ = leader.cmd.Process.Signal(syscall.SIGTERM)
		leader.wait()
		daemon := pids[len(pids)-1]
		defer syscall.Kill(daemon, syscall.SIGKILL)
		if !alive(daemon) {
			t.Fatalf("with --contain group the setsid daemon %d was expected to escape (README: What escapes)", daemon)
		}
		for _, pid := range pids[:len(pids)-1] {
			if alive(pid) {
				t.Fatalf("process %d of the group outlived leaderrun", pid)
			}
		}
	})
}

// noCgroupLeft checks that the run of leaderrun pid left no sub-cgroup
// behind (leaderrun, or after its death the guard, removes it). The guard
// removes it just after the tree is gone, so give it a moment.
func noCgroupLeft(t *testing.T, parent string, pid int) {
	t.Helper()
	pattern := filepath.Join(parent, fmt.Sprintf("leaderrun-%d-*", pid))
	for deadline := time.Now().Add(5 * time.Second); ; {
		left, _ := filepath.Glob(pattern)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroups left behind: %v", left)
		}
		time.Sleep(10 * time.Millisecond) // no event for an rmdir by another process
	}
}

// leaderrun SIGSTOPped under a running leader: the guard stops the child and
// kills it before the lease could expire; after SIGCONT leaderrun exits 124.
func TestGuardLeaderFrozen(t *testing.T) {
	t.Parallel()
	_, az := azShared(t, "poll=200ms")
	redisAddr, redisEnv := redisE2EShared(t)
	cases := []struct {
		name  string
		env   []string
		args  []string
		ttl   time.Duration
		redis string // the Redis server's address, to read the lease's end from
	}{
		{"redis", redisEnv, []string{"--ttl", "3s", "--renew-every", "500ms", "--grace", "1s"}, 3 * time.Second, redisAddr},
		{"azurite", append(azEnv(azDevKey), "LEADERRUN_STORE="+az), []string{"--ttl", "15s", "--renew-every", "1s", "--grace", "2s"}, 15 * time.Second, ""},
	}
	for _, c := range cases {
		for _, ignoreTerm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ignoreterm=%v", c.name, ignoreTerm), func(t *testing.T) {
				t.Parallel()
				got := filepath.Join(t.TempDir(), "got")
				script := fmt.Sprintf(`trap 'echo TERM >> %s; exit 0' TERM; echo "ready $$"; while :; do sleep 0.05; done`, got)
				if ignoreTerm {
					script = fmt.Sprintf(`trap 'echo TERM >> %s' TERM; echo "ready $$"; while :; do sleep 0.05; done`, got)
				}
				name := fmt.Sprintf("e2e-frozen-%s-%v-%d", c.name, ignoreTerm, os.Getpid())
				args := append([]string{"-v", "--log-format", "json", "--name", name}, c.args...)
				p := start(t, c.env, append(args, "--", "sh", "-c", script)...)
				f := strings.Fields(p.line())
				if len(f) != 2 || f[0] != "ready" {
					t.Fatalf("child said %q", f)
				}
				child, _ := strconv.Atoi(f[1])
				waitStderr(t, p, `"event":"renewed"`, 10*time.Second)
				died := leasetest.WatchDeath(t, child)
				leasetest.Freeze(t, p.cmd.Process.Pid)
				frozenAt := time.Now()
				// On Redis the lease's end is the store's own expiry: read
				// once leaderrun is frozen (a renewal still in flight can
				// only move it later) and again after the death (final:
				// nothing renews a frozen leader's lease).
				var storeEnd time.Duration
				if c.redis != "" {
					storeEnd, _ = redisE2ELeaseEnd(t, c.redis, name)
				}
				var death leasetest.Death
				select {
				case death = <-died:
				case <-time.After(c.ttl + 10*time.Second):
					leasetest.Thaw(t, p.cmd.Process.Pid)
					t.Fatalf("child %d still alive %v after leaderrun was frozen", child, c.ttl+10*time.Second)
				}
				if c.redis != "" {
					if end, ok := redisE2ELeaseEnd(t, c.redis, name); ok {
						storeEnd = end
					}
				}
				leasetest.Thaw(t, p.cmd.Process.Pid)
				if code := p.wait(); code != 124 {
					t.Fatalf("exit %d after SIGCONT; want 124 (stderr: %s)", code, p.stderr.String())
				}
				sent := renewalsSent(t, p)
				last := sent[len(sent)-1]
				if last.After(frozenAt) {
					t.Fatalf("a renewal sent after the freeze (%v > %v) was confirmed", last, frozenAt)
				}
				margin, end := last.Add(c.ttl).Sub(death.Wall), "last_sent+TTL"
				if storeEnd != 0 {
					margin, end = storeEnd-death.Boot, "the store's expiry"
				}
				t.Logf("measure: %s ignore_term=%v: child dead %v before %s", c.name, ignoreTerm, margin.Round(time.Millisecond), end)
				if margin <= 0 {
					t.Fatalf("the child died %v AFTER %s", -margin, end)
				}
				if b, _ := os.ReadFile(got); !strings.Contains(string(b), "TERM") {
					t.Fatalf("the child never got the stop signal")
				}
				if m := lastJSON(t, p); m["event"] != "lost" {
					t.Fatalf("final line %v; want event lost", m)
				}
			})
		}
	}
}

// The guard SIGKILLed under a running leader: the child is stopped, exit 124.
func TestGuardKilled(t *testing.T) {
	t.Parallel()
	p := start(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "-v", "--name", "guard-dies", "--", "sh", "-c", `echo "ready $$"; exec sleep 300`)
	f := strings.Fields(p.line())
	child, _ := strconv.Atoi(f[1])
	gpid := guardPID(t, p)
	if err := syscall.Kill(gpid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if c := p.wait(); c != 124 {
		t.Fatalf("exit %d; want 124: %s", c, p.stderr.String())
	}
	if alive(child) {
		t.Fatalf("child %d outlived leaderrun", child)
	}
	if l := p.lastLine(); !strings.Contains(l, "guard process") {
		t.Fatalf("final line %q does not say the guard died", l)
	}
}

// The guard stopped by a process of the same user (the child itself can
// do it): a stopped guard would not act should leaderrun die, so leaderrun
// stops the child as when the guard dies (exit 124), ends the stopped guard
// (which held the file store's lock) and the lease is free at once.
func TestGuardStopped(t *testing.T) {
	t.Parallel()
	store := fileStore(t)
	p := start(t, []string{"LEADERRUN_STORE=" + store}, "-v", "--name", "guard-stopped", "--", "sh", "-c", `echo "ready $$"; exec sleep 300`)
	f := strings.Fields(p.line())
	child, _ := strconv.Atoi(f[1])
	gpid := guardPID(t, p)
	if err := syscall.Kill(gpid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if c := p.wait(); c != 124 {
		t.Fatalf("exit %d; want 124: %s", c, p.stderr.String())
	}
	if alive(child) {
		t.Fatalf("child %d outlived leaderrun", child)
	}
	if alive(gpid) {
		syscall.Kill(gpid, syscall.SIGKILL)
		t.Fatalf("the stopped guard %d outlived leaderrun", gpid)
	}
	if l := p.lastLine(); !strings.Contains(l, "guard process") || !strings.Contains(l, "was stopped") {
		t.Fatalf("final line %q does not say the guard was stopped", l)
	}
	if code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + store}, "--wait", "0", "--name", "guard-stopped", "--", "true"); code != 0 {
		t.Fatalf("the next run: exit %d; want the lease free: %s", code, stderr)
	}
}

// A guard that never completes its handshake (LEADERRUN_GUARD_PROGRAM
// naming a program that is not a leaderrun guard of this build, here a
// script that sleeps or exits) is no guard: the child is not started, one
// line, 125, and the lease is left free.
func TestGuardWithoutHandshakeRefused(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{"sleeps": "exec sleep 300", "exits": "exit 0"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fake := filepath.Join(dir, "fakeguard")
			if err := os.WriteFile(fake, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			store := fileStore(t)
			marker := filepath.Join(dir, "ran")
			code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + store, "LEADERRUN_GUARD_PROGRAM=" + fake}, "--name", "fake-guard", "--", "touch", marker)
			if code != 125 || !strings.Contains(stderr, "handshake") || !strings.Contains(stderr, fake) {
				t.Fatalf("exit %d, stderr %q; want 125 saying the guard program %s failed its handshake", code, stderr, fake)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child ran")
			}
			if code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + store}, "--wait", "0", "--name", "fake-guard", "--", "true"); code != 0 {
				t.Fatalf("the next run: exit %d; want the lease free: %s", code, stderr)
			}
		})
	}
}

// The guard never outlives a clean run.
func TestGuardGoneAfterCleanRuns(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	for i := range 100 {
		p := start(t, env, "-v", "--name", "clean", "--", "true")
		gpid := guardPID(t, p)
		if c := p.wait(); c != 0 {
			t.Fatalf("run %d: exit %d: %s", i, c, p.stderr.String())
		}
		if alive(gpid) {
			t.Fatalf("run %d: guard %d outlived leaderrun", i, gpid)
		}
	}
}

// As a user who may not create cgroups: --contain cgroup is refused before
// anything starts (125, no child), and auto falls back to the process group
// and says so at -v.
func TestGuardContainUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run leaderrun as another user")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "started")
	run := func(contain string) *lr {
		p := launchAs(t, 65534, "-v", "--store", "file://"+dir, "--contain", contain, "--name", "unpriv", "--", "touch", marker)
		return p
	}
	p := run("cgroup")
	if c := p.wait(); c != 125 {
		t.Fatalf("--contain cgroup as uid 65534: exit %d; want 125: %s", c, p.stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child ran although --contain cgroup was refused")
	}
	if n := len(p.stderrLines()); n != 1 {
		t.Fatalf("want one line, got %d: %s", n, p.stderr.String())
	}
	p = run("auto")
	if c := p.wait(); c != 0 {
		t.Fatalf("--contain auto as uid 65534: exit %d: %s", c, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "process group only") {
		t.Fatalf("-v does not say the run fell back to the process group: %s", p.stderr.String())
	}
}

// launchAs is launch for another user (root only).
func launchAs(t *testing.T, uid int, args ...string) *lr {
	t.Helper()
	p := newLR(t, exec.Command(lrBin, args...))
	p.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	p.begin(false)
	return p
}

// Issue: success reported after the lease was lost. leaderrun frozen past the
// TTL while its child finishes by itself; another instance takes the lease;
// leaderrun resumes: it must not report the child's 0 but exit 124, saying
// leadership was not held for the child's whole run.
func TestFrozenLeaderChildFinishedReportsLost(t *testing.T) {
	t.Parallel()
	_, env := redisE2EShared(t)
	name := e2eName(t, "frozen-done")
	first, in := startStdin(t, env, "-v", "--log-format", "json", "--name", name, "--ttl", "2s", "--",
		"sh", "-c", `echo ready; read x; exit 0`)
	if l := first.line(); l != "ready" {
		t.Fatalf("child said %q", l)
	}
	waitStderr(t, first, `"event":"renewed"`, 10*time.Second)
	leasetest.Freeze(t, first.cmd.Process.Pid) // every thread, before the child may end
	in.Close()                                 // the child finishes by itself while leaderrun is frozen
	second := start(t, env, "--name", name, "--ttl", "2s", "--wait", "30s", "--", "sh", "-c", `echo "took $LEADERRUN_LEASE_TOKEN"`)
	if l := second.line(); !strings.HasPrefix(l, "took ") {
		t.Fatalf("second instance said %q", l)
	}
	if c := second.wait(); c != 0 {
		t.Fatalf("second instance exit %d: %s", c, second.stderr.String())
	}
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if c := first.wait(); c != 124 {
		t.Fatalf("the frozen leader exited %d after another took the lease; want 124: %s", c, first.stderr.String())
	}
	m := lastJSON(t, first)
	// Whether leaderrun noticed the passed deadline or the child's exit first
	// decides the wording ("lost" or "not held for the child's whole run");
	// either way it is an error with exit 124, never the child's 0.
	if msg := fmt.Sprint(m["msg"]); m["event"] != "lost" || m["level"] != "ERROR" ||
		!strings.Contains(msg, "whole run") && !strings.Contains(msg, "lost") {
		t.Fatalf("final line %v; want an error saying leadership was lost", m)
	}
}

// The lease lost between two renewals (the key deleted) while a short child
// runs: the keeper never sees it, but the release does, and a child's 0 is
// not reported as success (found by the chaos run).
func TestLostBetweenRenewalsReportsLost(t *testing.T) {
	t.Parallel()
	addr, env := redisE2EShared(t)
	name := e2eName(t, "lost-quietly")
	p, in := startStdin(t, env, "--log-format", "json", "--name", name, "--", "sh", "-c", `echo ready; read x; exit 0`)
	if l := p.line(); l != "ready" {
		t.Fatalf("child said %q", l)
	}
	redisE2ECLI(t, addr, "DEL", "leaderrun:{"+name+"}")
	in.Close()
	if c := p.wait(); c != 124 {
		t.Fatalf("exit %d; want 124: %s", c, p.stderr.String())
	}
	if m := lastJSON(t, p); m["event"] != "lost" || m["level"] != "ERROR" {
		t.Fatalf("final line %v; want an error saying the lease was lost", m)
	}
}

// A child that stops its guard and has leaderrun SIGKILLed in the same
// instant (here: leaderrun frozen first, so that it cannot act on the
// guard's stop, then the guard stopped, then leaderrun SIGKILLed): the guard
// is in a process group of its own in leaderrun's session, which leaderrun's
// death orphans, and the kernel continues a stopped process of a group that
// becomes orphaned (SIGHUP, ignored by the guard, then SIGCONT). The guard
// then kills the tree, and the next holder starts only after it is gone. The
// tree's deaths are taken from pidfds.
func TestGuardStoppedAndLeaderKilled(t *testing.T) {
	t.Parallel()
	store := fileStore(t)
	env := []string{"LEADERRUN_STORE=" + store}
	p := start(t, env, "-v", "--contain", "group", "--name", "guard-stop-kill", "--", treeChild(false)[0], treeChild(false)[1], treeChild(false)[2])
	pids := treePIDs(t, p)
	gpid := guardPID(t, p)
	t.Cleanup(func() { _ = syscall.Kill(gpid, syscall.SIGKILL) })
	var pidfds []int
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open %d: %v", pid, err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		pidfds = append(pidfds, fd)
	}
	out := filepath.Join(t.TempDir(), "probe")
	waiter := start(t, env, "--wait", "1m", "--name", "guard-stop-kill", "--", overlapProbe(out, pids)[0], overlapProbe(out, pids)[1], overlapProbe(out, pids)[2])
	leasetest.Freeze(t, p.cmd.Process.Pid)
	leasetest.Freeze(t, gpid)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// Not p.wait() yet: the tree holds leaderrun's stderr open.
	for i, fd := range pidfds {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 10_000)
		for errors.Is(err, unix.EINTR) {
			n, err = unix.Poll(fds, 10_000)
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("tree process %d still runs 10s after leaderrun was SIGKILLed with its guard stopped; leaderrun and its guard said:\n%s", pids[i], p.stderr.String())
		}
	}
	t.Logf("measure: tree gone %v after SIGKILL of leaderrun (guard stopped)", time.Since(killed).Round(100*time.Microsecond))
	p.wait()
	if saw := probeSaw(t, waiter, out); strings.Contains(saw, "overlap") || !strings.Contains(saw, "started") {
		t.Fatalf("the next holder saw %q; want no overlap", saw)
	}
}
