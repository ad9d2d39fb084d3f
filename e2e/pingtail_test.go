package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/ptytest"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// lrWith runs leaderrun with its stdout and stderr on the files given (as
// cron or systemd would give them: inherited descriptors, not a Go pipe).
func lrWith(t *testing.T, env []string, stdout, stderr *os.File, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(lrBin, args...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd
}

func create(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readFile(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPingOutputTail: with --ping-output-tail, a failure's ping carries the
// end of the command's stdout and stderr, and each stream still reaches its
// own place whole; one shared by both (2>&1) gets them in the order the
// command wrote them, before leaderrun's final line. A success's ping
// carries no output.
func TestPingOutputTail(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	const script = `printf 'o1\n'; printf 'e1\n' >&2; printf 'o2 s3cr3t\n'; exit "$1"`
	for _, c := range []struct {
		name   string
		shared bool
		code   int
	}{{"apart", false, 3}, {"shared", true, 3}, {"success", false, 0}} {
		t.Run(c.name, func(t *testing.T) {
			s := newPingServer(t, false)
			out, errf := create(t, "out"), create(t, "err")
			if c.shared {
				errf = out
			}
			cmd := lrWith(t, env, out, errf, "-q", "--name", "tail-"+c.name, "--ping", s.url, "--ping-output-tail", "20", "--", "sh", "-c", script, "sh", string(rune('0'+c.code)))
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != c.code {
				t.Fatalf("exit %d (%v); want %d: %s", code, err, c.code, readFile(t, errf))
			}
			gotOut, gotErr := readFile(t, out), readFile(t, errf)
			if c.shared {
				if !strings.HasPrefix(gotOut, "o1\ne1\no2 s3cr3t\n") || !strings.Contains(gotOut, "leaderrun: ") {
					t.Errorf("the shared stream got %q; want the command's writes in order, then leaderrun's line", gotOut)
				}
			} else if gotOut != "o1\no2 s3cr3t\n" || !strings.HasPrefix(gotErr, "e1\n") {
				t.Errorf("stdout got %q, stderr %q; want each its own writes", gotOut, gotErr)
			}
			s.mu.Lock()
			end := s.reqs[len(s.reqs)-1]
			s.mu.Unlock()
			if c.code == 0 {
				if strings.Contains(end.body, "o1") || strings.Contains(end.body, "\n") {
					t.Errorf("the success's ping carries %q; want leaderrun's line only", end.body)
				}
				return
			}
			_, tail, _ := strings.Cut(end.body, "\n")
			head, got, _ := strings.Cut(tail, "\n")
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			if c.shared {
				// one pipe: the order is the command's
				lines = []string{strings.Join(lines, "|")}
			} else {
				slices.Sort(lines) // two pipes: each stream's chunks in order, the two in any
			}
			want := []string{"o1|e1|o2 s3cr3t"}
			if !c.shared {
				want = []string{"e1", "o1", "o2 s3cr3t"}
			}
			if head != "--- the command's output (stdout and stderr) (16 bytes) ---" || !slices.Equal(lines, want) {
				t.Errorf("the failure's ping carries %q after leaderrun's line; want a line saying what follows, and o1, e1, o2", tail)
			}
		})
	}
}

// TestPingOutputTailLeaderrunStopped: a leaderrun stopped (SIGSTOP) while
// the command writes far more than a pipe holds does not block the
// command: leaderrun-ping copies its output on. Continued, leaderrun
// pings the failure with the output's end.
func TestPingOutputTailLeaderrunStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"up", "go", "done"} {
		if err := syscall.Mkfifo(filepath.Join(dir, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := newPingServer(t, false)
	out, errf := create(t, "out"), create(t, "err")
	// 4 MB, 64 times what a pipe holds, then the last line.
	script := `cd "$1"; echo up > up; read x < go; head -c 4000000 /dev/zero | tr '\0' x; echo; echo the end; echo done > done; exit 5`
	cmd := lrWith(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, out, errf, "--name", "tail-stopped", "--ping", s.url, "--ping-output-tail", "100", "--", "sh", "-c", script, "sh", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, reaped := make(chan error, 1), make(chan struct{})
	go func() { exited <- cmd.Wait(); close(reaped) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-reaped
	})
	readFIFO(t, filepath.Join(dir, "up"), exited) // the command runs
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readFIFO(t, filepath.Join(dir, "done"), exited) // written while leaderrun is stopped
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	<-exited
	if code := cmd.ProcessState.ExitCode(); code != 5 {
		t.Fatalf("exit %d; want 5: %s", code, readFile(t, errf))
	}
	if got := readFile(t, out); len(got) != 4000000+len("\nthe end\n") || !strings.HasSuffix(got, "x\nthe end\n") {
		t.Errorf("stdout got %d bytes; want the 4000009 the command wrote", len(got))
	}
	s.mu.Lock()
	end := s.reqs[len(s.reqs)-1]
	s.mu.Unlock()
	if !strings.HasSuffix(end.path, "/5") || !strings.HasSuffix(end.body, "x\nthe end\n") || !strings.Contains(end.body, "--- the last 100 bytes of the command's output (stdout and stderr) (4000009 in all) ---\n") {
		t.Errorf("the end's ping: %s %.400q; want /5 with the output's last 100 bytes", end.path, end.body)
	}
}

// readFIFO reads a line from the FIFO at path, failing the test if the
// command (leaderrun) exits first or nothing comes within a minute: the
// command blocked.
func readFIFO(t *testing.T, path string, exited <-chan error) {
	t.Helper()
	got := make(chan string, 1)
	go func() { // ends when the FIFO's writer writes or exits; the test's end unblocks it otherwise
		f, err := os.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		l, _ := bufio.NewReader(f).ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		if l == "" {
			t.Fatalf("%s: nothing read", path)
		}
	case err := <-exited:
		t.Fatalf("leaderrun exited (%v) before the command wrote %s", err, filepath.Base(path))
	case <-time.After(time.Minute):
		t.Fatalf("the command did not write %s within a minute: blocked on its output?", filepath.Base(path))
	}
}

// TestPingOutputTailKeepsTerminal: a stream that is a terminal stays the
// command's (colour, line editing and job control are its), and the
// failure's ping says that it was not captured.
func TestPingOutputTailKeepsTerminal(t *testing.T) {
	t.Parallel()
	master, slave := ptytest.Open(t)
	term := ptytest.NewTerm(t, master)
	s := newPingServer(t, false)
	errf := create(t, "err")
	cmd := lrWith(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, slave, errf, "--name", "tail-tty", "--ping", s.url, "--ping-output-tail", "100", "--",
		"sh", "-c", `if test -t 1; then echo stdout-is-a-terminal; fi; echo e1 >&2; exit 4`)
	err := cmd.Run()
	slave.Close()
	if code := cmd.ProcessState.ExitCode(); code != 4 {
		t.Fatalf("exit %d (%v); want 4: %s", code, err, readFile(t, errf))
	}
	term.Expect("stdout-is-a-terminal", 10*time.Second)
	s.mu.Lock()
	end := s.reqs[len(s.reqs)-1]
	s.mu.Unlock()
	if _, tail, _ := strings.Cut(end.body, "\n"); tail != "--- the command's stderr (its stdout was a terminal, not captured) (3 bytes) ---\ne1\n" {
		t.Errorf("the failure's ping carries %q after leaderrun's line", tail)
	}
}

// TestPingOutputTailLeaderrunKilled: leaderrun SIGKILLed while the command
// writes: the guard ends the command, and leaderrun-ping, which copied its
// output to the end, ends with it rather than living on.
func TestPingOutputTailLeaderrunKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "up"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newPingServer(t, false)
	out, errf := create(t, "out"), create(t, "err")
	script := `cd "$1"; echo up > up; while :; do echo tick; sleep 0.01; done`
	cmd := lrWith(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, out, errf, "--name", "tail-killed", "--ping", s.url, "--ping-output-tail", "100", "--", "sh", "-c", script, "sh", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, reaped := make(chan error, 1), make(chan struct{})
	go func() { exited <- cmd.Wait(); close(reaped) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-reaped })
	readFIFO(t, filepath.Join(dir, "up"), exited)
	kids := childrenByName(t, cmd.Process.Pid)
	if kids["leaderrun-ping"] == 0 || kids["sh"] == 0 {
		t.Fatalf("leaderrun's children %v: want leaderrun-ping and sh", kids)
	}
	ping, child := leasetest.WatchDeath(t, kids["leaderrun-ping"]), leasetest.WatchDeath(t, kids["sh"])
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]<-chan leasetest.Death{"the command": child, "leaderrun-ping": ping} {
		select {
		case <-c:
		case <-time.After(time.Minute):
			t.Fatalf("%s still runs a minute after leaderrun was killed", name)
		}
	}
	if got := readFile(t, out); !strings.HasPrefix(got, "tick\n") {
		t.Errorf("stdout got %.40q; want the command's ticks", got)
	}
}

// childrenByName returns the PID of each child of pid (childrenOf), by
// its command name.
func childrenByName(t *testing.T, pid int) map[string]int {
	t.Helper()
	kids := map[string]int{}
	for _, k := range childrenOf(t, pid) {
		comm, _ := os.ReadFile("/proc/" + k + "/comm")
		kids[strings.TrimSpace(string(comm))], _ = strconv.Atoi(k)
	}
	return kids
}
