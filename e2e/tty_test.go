package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/ptytest"
)

// The terminal tests run an interactive bash in a real pseudo-terminal, as a
// user would, and leaderrun (the built binary, file store) as its job.

const (
	ttyPrompt = "lr-prompt$ "
	// ttyWait bounds each awaited event: generous, because the test machine
	// is shared; the times that matter are measured and logged.
	ttyWait = 30 * time.Second
)

// ttyShell is an interactive bash in a pty of its own.
type ttyShell struct {
	t      *testing.T
	term   *ptytest.Term
	master *os.File
	cmd    *exec.Cmd
	waited chan error
	store  string // --store URL $LR uses
	name   string // the lease $LR takes
}

// startTTYShell starts `bash --norc -i` as the session leader of a new pty,
// with $LR set to leaderrun on a private file store and lease name "tty".
func startTTYShell(t *testing.T) *ttyShell {
	t.Helper()
	return startTTYShellStore(t, fileStore(t), "tty")
}

// startTTYShellStore is startTTYShell with $LR on the given store and lease.
func startTTYShellStore(t *testing.T, store, name string) *ttyShell {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	master, slave := ptytest.Open(t)
	sh := &ttyShell{t: t, master: master, store: store, name: name, waited: make(chan error, 1)}
	sh.cmd = exec.Command(bash, "--norc", "--noprofile", "--noediting", "-i")
	sh.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=dumb", "LC_ALL=C",
		"PS1=" + ttyPrompt, "PS2=", "HISTFILE=/dev/null", "NO_COLOR=1",
		"LR=" + lrBin + " --store " + sh.store + " --name " + sh.name,
	}
	sh.cmd.Stdin, sh.cmd.Stdout, sh.cmd.Stderr = slave, slave, slave
	sh.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := sh.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() { sh.waited <- sh.cmd.Wait() }()
	t.Cleanup(func() {
		// Everything left in the shell's session, by PID: bash, leaderrun
		// and the child if the test failed half-way.
		for _, pid := range ttySessionPIDs(sh.cmd.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-sh.waited
	})
	sh.term = ptytest.NewTerm(t, master)
	sh.expect(ttyPrompt)
	return sh
}

func (sh *ttyShell) expect(s string) string {
	sh.t.Helper()
	return sh.term.Expect(s, ttyWait)
}

// typeLine types a command line and waits for the terminal's echo of it,
// which skips any output (prompts, job reports) that came before.
func (sh *ttyShell) typeLine(line string) {
	sh.t.Helper()
	sh.term.Send(line + "\n")
	sh.expect(line + "\r\n")
}

// run types a command line and returns its output, up to the next prompt.
func (sh *ttyShell) run(line string) string {
	sh.t.Helper()
	sh.typeLine(line)
	return sh.expect(ttyPrompt)
}

// lastStatus returns $? of the last command.
func (sh *ttyShell) lastStatus() int {
	sh.t.Helper()
	out := sh.run(`echo "status=$?"`)
	m := regexp.MustCompile(`status=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		sh.t.Fatalf("no status in %q", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// echoes types a line for cat and waits until cat wrote it back: the
// terminal echoes it once and cat once more.
func (sh *ttyShell) echoes(line string) {
	sh.t.Helper()
	sh.term.Send(line + "\n")
	sh.expect(line + "\r\n" + line + "\r\n")
}

func (sh *ttyShell) modes() unix.Termios { return ptytest.Modes(sh.t, sh.master) }

// exit ends bash and waits for it.
func (sh *ttyShell) exit() {
	sh.t.Helper()
	sh.term.Send("exit\n")
	select {
	case err := <-sh.waited:
		sh.waited <- err
		if err != nil {
			sh.t.Errorf("bash: %v", err)
		}
	case <-time.After(ttyWait):
		sh.t.Fatal("bash did not exit")
	}
}

// leaseFree checks with `leaderrun status` that $LR's lease is free.
func (sh *ttyShell) leaseFree() {
	sh.t.Helper()
	if code, out := runLR(sh.t, nil, "status", "--store", sh.store, sh.name); code != 3 {
		sh.t.Errorf("leaderrun status: exit %d, want 3 (free): %s", code, out)
	}
}

// ttySessionPIDs lists the processes of session sid.
func ttySessionPIDs(sid int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := ttyProcStat(pid); ok && st.session == sid {
			pids = append(pids, pid)
		}
	}
	return pids
}

type ttyStat struct {
	state   byte
	ppid    int
	session int
}

func ttyProcStat(pid int) (ttyStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ttyStat{}, false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 4 {
		return ttyStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	sid, _ := strconv.Atoi(f[3])
	return ttyStat{state: f[0][0], ppid: ppid, session: sid}, true
}

// ttyChildOf returns the PID of pid's child named comm. leaderrun starts its
// child from a thread of its own, so every thread's children are listed.
func ttyChildOf(t *testing.T, pid int, comm string) int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			all = append(all, f)
			c, err := os.ReadFile("/proc/" + f + "/comm")
			if err == nil && strings.TrimSpace(string(c)) == comm {
				n, _ := strconv.Atoi(f)
				return n
			}
		}
	}
	t.Fatalf("process %d has no child %s (children %q)", pid, comm, all)
	return 0
}

// ttyExits waits, on a pidfd, for pid to exit (or become a zombie).
func ttyExits(t *testing.T, pid int, d time.Duration) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0).Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd: %v", err)
		}
		return n == 1
	}
}

// TestTerminalSuspend: Ctrl-Z on `leaderrun -- cat` gives
// the shell its prompt back with the job stopped; fg gives cat the terminal
// again; Ctrl-C ends it; the terminal settings are what they were and the
// lease is free.
func TestTerminalSuspend(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	before := sh.modes()

	sh.typeLine("$LR -- cat")
	sh.expect("lease tty acquired")
	sh.echoes("one")

	sent := time.Now()
	sh.term.Send("\x1a") // Ctrl-Z
	sh.expect("Stopped")
	sh.expect(ttyPrompt)
	t.Logf("Ctrl-Z → prompt in %v", time.Since(sent))
	if got := sh.modes(); got != before {
		t.Errorf("terminal settings while the job is stopped differ:\n got %+v\nwant %+v", got, before)
	}
	out := sh.run("jobs -l")
	if !strings.Contains(out, "Stopped") || !strings.Contains(out, "$LR -- cat") {
		t.Errorf("jobs -l: %q, want the job stopped", out)
	}

	sh.term.Send("fg\n")
	sh.expect("$LR -- cat\r\n") // bash names the job it continues
	sh.echoes("two")

	sh.term.Send("\x03") // Ctrl-C
	sh.expect("killed by SIGINT")
	sh.expect(ttyPrompt)
	if code := sh.lastStatus(); code != 130 {
		t.Errorf("leaderrun exited %d, want 130", code)
	}
	if got := sh.modes(); got != before {
		t.Errorf("terminal settings after the job differ:\n got %+v\nwant %+v", got, before)
	}
	sh.leaseFree()
	sh.exit()
}

// TestTerminalSuspendPastTTL: while the job is suspended, leaderrun renews
// nothing, so on an expiring store the lease lapses (another instance gets
// it); continued, leaderrun stops the child and exits 124.
func TestTerminalSuspendPastTTL(t *testing.T) {
	t.Parallel()
	addr, _ := redisE2EShared(t)
	store, name := "redis://"+addr, e2eName(t, "tty")
	sh := startTTYShellStore(t, store, name)
	sh.typeLine("$LR --ttl 3s -- cat")
	sh.expect("acquired")
	sh.echoes("one")
	sh.term.Send("\x1a")
	sh.expect("Stopped")
	sh.expect(ttyPrompt)
	// The event that matters: another instance acquires the lease once it
	// has expired.
	if code, out := runLR(t, nil, "--store", store, "--name", name, "--wait", "1m", "--", "true"); code != 0 {
		t.Fatalf("second instance: exit %d: %s", code, out)
	}
	sh.typeLine("fg")
	// The guard stopped cat at the deadline while leaderrun was suspended, so
	// leaderrun reports that leadership was not held for the whole run.
	sh.expect("exit 124")
	sh.expect(ttyPrompt)
	if code := sh.lastStatus(); code != 124 {
		t.Errorf("leaderrun exited %d, want 124", code)
	}
	sh.exit()
}

// TestTerminalSuspendModes: a child that changed the terminal's modes (here
// echo off) and is stopped gets the shell's modes restored while stopped, and
// its own back on fg.
func TestTerminalSuspendModes(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	before := sh.modes()
	if before.Lflag&unix.ECHO == 0 {
		t.Fatal("the shell's terminal does not echo")
	}
	sh.typeLine(`$LR -- sh -c 'stty -echo; echo ready; while IFS= read -r l; do echo "got:$l"; done'`)
	sh.expect("ready\r\n")
	sh.term.Send("one\n")
	if out := sh.expect("got:one\r\n"); strings.Contains(out, "one") {
		t.Errorf("echo is on while the child runs: %q", out)
	}
	sh.term.Send("\x1a")
	sh.expect("Stopped")
	sh.expect(ttyPrompt)
	if got := sh.modes(); got != before {
		t.Errorf("terminal settings while the job is stopped differ:\n got %+v\nwant %+v", got, before)
	}
	sh.typeLine("fg")
	// Typed at once, "two" may be echoed under the shell's modes before
	// leaderrun has handed the terminal over; its line read back proves
	// the hand-over, after which the child's modes must be in force.
	sh.term.Send("two\n")
	sh.expect("got:two\r\n")
	if sh.modes().Lflag&unix.ECHO != 0 {
		t.Error("echo is on while the continued child runs: its modes were not restored on fg")
	}
	sh.term.Send("three\n")
	if out := sh.expect("got:three\r\n"); strings.Contains(out, "three") {
		t.Errorf("echo is on while the continued child runs: %q", out)
	}
	sh.term.Send("\x03")
	sh.expect(ttyPrompt)
	if code := sh.lastStatus(); code != 130 {
		t.Errorf("leaderrun exited %d, want 130", code)
	}
	if got := sh.modes(); got != before {
		t.Errorf("terminal settings after the job differ:\n got %+v\nwant %+v", got, before)
	}
	sh.exit()
}

// TestTerminalPipe (item 2): with stdin a pipe, the child still gets the
// terminal (as `cat f | leaderrun -- less` needs): it reads /dev/tty.
func TestTerminalPipe(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	before := sh.modes()
	sh.typeLine(`printf 'from the pipe\n' | $LR -- sh -c 'IFS= read -r l </dev/tty; echo "tty:$l"; cat'`)
	sh.expect("lease tty acquired")
	sh.term.Send("typed\n")
	sh.expect("tty:typed\r\n")
	sh.expect("from the pipe\r\n")
	sh.expect(ttyPrompt)
	if code := sh.lastStatus(); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if got := sh.modes(); got != before {
		t.Errorf("terminal settings after the job differ:\n got %+v\nwant %+v", got, before)
	}
	sh.leaseFree()
	sh.exit()
}

// TestTerminalPipeSibling: in `leaderrun -- CMD | less`, the reader shares
// leaderrun's process group and is stopped by SIGTTIN if it reads the
// terminal while the child holds it; leaderrun is not stopped with it (the
// signal reaches the whole group), and when the child exits, leaderrun takes
// the terminal back and continues the reader.
func TestTerminalPipeSibling(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	// Each command of a pipeline makes the pipeline's group the foreground
	// group before its exec, so a late one could take the terminal back
	// from leaderrun's child: the lease is held elsewhere until the reader
	// has shown that it runs.
	holder := start(t, nil, "--store", sh.store, "--name", sh.name, "--", "sh", "-c", "echo held; exec sleep 600")
	if l := holder.line(); l != "held" {
		t.Fatalf("holder's child wrote %q", l)
	}
	sh.typeLine(`$LR -- sh -c 'echo out; read -r a </dev/tty' | sh -c 'echo "sibling $$." >/dev/tty; read x; read -r b </dev/tty'`)
	sh.expect("sibling ")
	sib, err := strconv.Atoi(sh.expect(".\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	holder.wait()
	sh.expect("acquired")
	// The reader's state changes have no event to wait on (it is not our
	// child): look at its state.
	sh.awaitState(sib, func(st byte) bool { return st == 'T' }, "stopped on its terminal read")
	sh.term.Send("first\n") // read by leaderrun's child, which then exits
	sh.expect("exited with code 0")
	// leaderrun was not stopped with the reader (its child could finish),
	// and continued it when it took the terminal back.
	sh.awaitState(sib, func(st byte) bool { return st != 'T' }, "continued")
	// Whether bash still counts the job as running depends on the order in
	// which it collects leaderrun's exit and the reader's continue, so the
	// test ends here (the cleanup kills the session).
}

// awaitState polls the state of process pid until ok accepts it.
func (sh *ttyShell) awaitState(pid int, ok func(byte) bool, what string) {
	sh.t.Helper()
	deadline := time.Now().Add(ttyWait)
	for {
		st, found := ttyProcStat(pid)
		if found && ok(st.state) {
			return
		}
		if time.Now().After(deadline) {
			sh.t.Fatalf("process %d not %s after %v (state %c)\n%s", pid, what, ttyWait, st.state, sh.term.Output())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTerminalBackground (item 3): `leaderrun -- cat &` stops on SIGTTIN
// with its child, so bash reports it stopped; `kill %1` (TERM, then SIGCONT)
// ends cat and leaderrun; fg on another one gives cat the terminal.
func TestTerminalBackground(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	sh.run("set -b") // report job changes at once
	pid := sh.bgLeaderrun()
	cat := ttyChildOf(t, pid, "cat")
	sh.typeLine("kill %1")
	for _, p := range []int{cat, pid} {
		if !ttyExits(t, p, ttyWait) {
			t.Fatalf("process %d still runs after kill %%1", p)
		}
	}
	sh.expect("Exit 143") // leaderrun's exit: cat was killed by SIGTERM
	sh.run("echo sync")
	sh.leaseFree()

	// The same stopped job, continued in the foreground, reads the terminal.
	sh.bgLeaderrun()
	sh.term.Send("fg\n")
	sh.expect("$LR -- cat\r\n")
	sh.echoes("three")
	sh.term.Send("\x04") // EOF: cat exits 0
	sh.expect(ttyPrompt)
	if code := sh.lastStatus(); code != 0 {
		t.Errorf("leaderrun exited %d, want 0", code)
	}
	sh.exit()
}

// bgLeaderrun starts `$LR -- cat &`, waits for bash to report it stopped on
// terminal input, and returns leaderrun's PID.
func (sh *ttyShell) bgLeaderrun() int {
	sh.t.Helper()
	sh.typeLine("$LR -- cat & echo pid=$!")
	sh.expect("pid=")
	pid, err := strconv.Atoi(sh.expect("\r\n"))
	if err != nil {
		sh.t.Fatal(err)
	}
	sh.expect("Stopped")
	sh.run("echo sync") // past the prompt, wherever bash printed the report
	if out := sh.run("jobs -l"); !strings.Contains(out, "Stopped") {
		sh.t.Fatalf("jobs -l: %q, want the job stopped", out)
	}
	return pid
}

// TestTerminalHangup (item 3, as reported): a background leaderrun stopped
// with its child on SIGTTIN must not hold the lease after the terminal
// closes: bash and the kernel send SIGHUP and SIGCONT, leaderrun forwards HUP
// with a SIGCONT, and both exit; the lease is free.
func TestTerminalHangup(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	sh.run("set -b")
	pid := sh.bgLeaderrun()
	cat := ttyChildOf(t, pid, "cat")
	sh.master.Close() // hang up
	for _, p := range []int{cat, pid} {
		if !ttyExits(t, p, ttyWait) {
			t.Fatalf("process %d still runs after the terminal closed", p)
		}
	}
	sh.leaseFree()
}

// TestForwardedTermEscalates (item 3): a TERM to leaderrun that the child
// ignores is followed by SIGKILL after --grace; a second TERM kills at once.
func TestForwardedTermEscalates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		grace string
		terms int
	}{
		{"one TERM, SIGKILL after the grace", "300ms", 1},
		// The grace is longer than wait's bound: only the second TERM can
		// end the child in time.
		{"second TERM kills at once", "5m", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, nil, "--store", fileStore(t), "--name", "esc", "--ttl", "30m", "--grace", tt.grace, "--",
				"sh", "-c", "trap '' TERM; echo ready $$; exec sleep 3600")
			child, err := strconv.Atoi(strings.TrimPrefix(p.line(), "ready "))
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.terms {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if i == 0 && tt.terms > 1 {
					waitStderr(t, p, "SIGKILL follows", ttyWait) // forwarded
				}
			}
			if code := p.wait(); code != 137 {
				t.Errorf("exit %d, want 137 (child SIGKILLed): %s", code, p.stderr.String())
			}
			if !ttyExits(t, child, 0) {
				t.Error("child still runs")
			}
		})
	}
}

// foreground returns the terminal's foreground process group (tcgetpgrp on
// the master reads the slave's).
func (sh *ttyShell) foreground() int {
	sh.t.Helper()
	rc, err := sh.master.SyscallConn()
	if err != nil {
		sh.t.Fatal(err)
	}
	var fg int
	var ierr error
	if err := rc.Control(func(fd uintptr) { fg, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }); err != nil || ierr != nil {
		sh.t.Fatalf("TIOCGPGRP: %v %v", err, ierr)
	}
	return fg
}

// ttyPids parses "CHILD LEADERRUN", which a child writes as "$$ $PPID".
func ttyPids(t *testing.T, s string) (child, lr int) {
	t.Helper()
	if _, err := fmt.Sscan(s, &child, &lr); err != nil {
		t.Fatalf("pids %q: %v", s, err)
	}
	return child, lr
}

// ttyFifo makes a named pipe in a directory of the test's.
func ttyFifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := dir + "/" + name
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// endBackground ends a leaderrun that is no job of the shell: TERM, its exit
// awaited on a pidfd, and the lease free.
func (sh *ttyShell) endBackground(pid int) {
	sh.t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		sh.t.Fatal(err)
	}
	if !ttyExits(sh.t, pid, ttyWait) {
		sh.t.Fatalf("leaderrun %d still runs after TERM", pid)
	}
	sh.leaseFree()
}

// TestTerminalScriptBackgroundCtrlC: `leaderrun … &` in a script shares the
// script's process group, the terminal's foreground group; it must not make
// its child the foreground group, so Ctrl-C reaches the script and ends it
// at once, as it does with a plain `sleep &` (the background jobs, which
// ignore SIGINT, run on).
func TestTerminalScriptBackgroundCtrlC(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	sh.typeLine(`bash -c '$LR -- sh -c "echo started \$\$ \$PPID; exec sleep 600" & sleep 601 & wait'`)
	sh.expect("started ")
	child, lr := ttyPids(t, sh.expect("\r\n"))
	// The child printed after its exec: a hand-over (made before the exec)
	// has happened by now.
	st, ok := ttyProcStat(lr)
	if !ok {
		t.Fatal("leaderrun is gone")
	}
	script := st.ppid
	if fg := sh.foreground(); fg != script {
		t.Errorf("foreground group %d, want the script's %d (the child is %d)", fg, script, child)
	}
	sent := time.Now()
	sh.term.Send("\x03")
	sh.expect(ttyPrompt)
	t.Logf("Ctrl-C → prompt in %v", time.Since(sent))
	if fg := sh.foreground(); fg != sh.cmd.Process.Pid {
		t.Errorf("foreground group %d after the script, want the shell's %d", fg, sh.cmd.Process.Pid)
	}
	if code := sh.lastStatus(); code != 130 {
		t.Errorf("the script exited %d, want 130 (SIGINT)", code)
	}
	sh.endBackground(lr)
	sh.exit()
}

// TestTerminalScriptBackgroundRead: while `leaderrun … &` runs, the script
// that started it reads the terminal: it is not stopped, and reads what is
// typed.
func TestTerminalScriptBackgroundRead(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	started := ttyFifo(t, t.TempDir(), "started")
	sh.typeLine(`bash -c '$LR -- sh -c "echo \$\$ \$PPID >` + started + `; exec sleep 600" & read pids <` + started +
		`; read -p "type: " x; echo "got:$x pids:$pids"'`)
	sh.expect("type: ")
	sh.term.Send("hello\n")
	sh.expect("got:hello pids:")
	_, lr := ttyPids(t, sh.expect("\r\n"))
	sh.expect(ttyPrompt)
	if code := sh.lastStatus(); code != 0 {
		t.Errorf("the script exited %d, want 0", code)
	}
	sh.endBackground(lr)
	sh.exit()
}

// TestTerminalStartScriptNohup: a start script runs `nohup leaderrun … &`
// and exits. When the child ends, the terminal stays with the interactive
// shell (not the dead script's process group), and the shell survives its
// next command.
func TestTerminalStartScriptNohup(t *testing.T) {
	t.Parallel()
	sh := startTTYShell(t)
	dir := t.TempDir()
	started, end := ttyFifo(t, dir, "started"), ttyFifo(t, dir, "end")
	// The script waits until the child runs, so that leaderrun starts it
	// while the script's group still has the foreground.
	script := dir + "/start.sh"
	body := "nohup $LR -- sh -c 'echo $$ $PPID >" + started + "; read x <" + end + "' >" + dir + "/w.log 2>&1 &\n" +
		"read pids <" + started + "\necho \"started $pids\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	sh.typeLine("sh " + script)
	sh.expect("started ")
	_, lr := ttyPids(t, sh.expect("\r\n"))
	sh.expect(ttyPrompt)
	if err := os.WriteFile(end, []byte("end\n"), 0); err != nil { // the child reads it and exits
		t.Fatal(err)
	}
	if !ttyExits(t, lr, ttyWait) {
		t.Fatal("leaderrun still runs after its child ended")
	}
	if fg := sh.foreground(); fg != sh.cmd.Process.Pid {
		t.Errorf("foreground group %d after leaderrun, want the shell's %d", fg, sh.cmd.Process.Pid)
	}
	if out := sh.run("echo alive"); !strings.Contains(out, "alive") {
		t.Errorf("echo alive printed %q", out)
	}
	sh.leaseFree()
	if b, err := os.ReadFile(dir + "/w.log"); err == nil {
		t.Logf("w.log:\n%s", b)
	}
	sh.exit()
}
