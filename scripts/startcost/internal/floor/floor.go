// Package floor is the floor of leaderrun's design on the file store, for
// the start-up benchmark's reference programs (designfloor, libfloor):
// every step a file run's promises need, each done the cheapest way Go
// allows, and nothing else (no command line, no logging, no renewal, no
// checks, no error messages).
//
//  1. the lock: flock(LOCK_EX|LOCK_NB) on FILE (or exit 75), and the
//     holder's record written into it (what status reads);
//  2. the guard: a second process from the program's own image, started
//     before the child and not waited for, holding a copy of the lock and
//     a pipe whose end tells it that its parent is gone (leaderrun's guard
//     also kills the tree then; this one only exits);
//  3. the cgroup: a sub-cgroup of the program's own, the child cloned
//     into it (CLONE_INTO_CGROUP), and after the child's exit its
//     "populated 0" awaited and the cgroup removed;
//  4. the child in its own process group with a parent-death signal;
//  5. the run history: one line appended to FILE.runs once the child runs,
//     one when it has ended.
//
// Run exits with the child's status. Without a writable cgroup v2
// hierarchy it exits 125, so the benchmark leaves its rows out.
package floor

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// GuardArg, as a program's only argument, makes it the guard: its main
// calls Guard before anything else.
const GuardArg = "-guard"

// Guard is the guard's whole job: fd 3 is the pipe from its parent, fd 4
// the lock; it returns when the pipe's other end is closed.
func Guard() {
	var b [1]byte
	_, _ = unix.Read(3, b[:])
}

// IsGuard reports whether args (os.Args) start the guard.
func IsGuard(args []string) bool { return len(args) == 2 && args[1] == GuardArg }

// Hooks are what a program built on the floor does besides its steps.
type Hooks struct {
	// AfterGuard runs once the guard has been forked, before the cgroup and
	// the child (leaderrun catches most of its signals there, overlapping
	// the guard's start).
	AfterGuard func()
	// AfterChild runs once the child has started (leaderrun catches WINCH
	// and CONT there).
	AfterChild func()
}

// Run runs argv under the lock on file, as the package comment says, and
// exits with its status. A nil hook is skipped.
func Run(file string, argv []string, h Hooks) {
	f, host, start := lock(file)
	// The guard and the child are started with syscall.ForkExec, as
	// leaderrun starts them: os/exec's first start forks a process of its
	// own to probe for pidfds.
	guard, toGuard := startGuard(f)
	if h.AfterGuard != nil {
		h.AfterGuard()
	}
	cg, cgfd := newCgroup()
	argv0, err := exec.LookPath(argv[0])
	if err != nil {
		os.Exit(127)
	}
	child, err := syscall.ForkExec(argv0, argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, UseCgroupFD: true, CgroupFD: cgfd}})
	if err != nil {
		_ = unix.Rmdir(cg)
		os.Exit(126)
	}
	if h.AfterChild != nil {
		h.AfterChild()
	}
	runs := file + ".runs"
	appendLine(runs, fmt.Appendf(nil, "%s %s start\n", host, start.Format(time.RFC3339Nano)))
	var ws syscall.WaitStatus
	wait4(child, &ws)
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	awaitEmpty(cg)
	_ = unix.Rmdir(cg)
	appendLine(runs, fmt.Appendf(nil, "%s %s end %d\n", host, time.Now().Format(time.RFC3339Nano), code))
	toGuard.Close()
	wait4(guard, nil)
	os.Exit(code)
}

// lock takes the lock on file (or exits 75) and writes the holder's record
// into it; it returns the locked file, this host's name and the run's
// start.
func lock(file string) (*os.File, string, time.Time) {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(125)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		os.Exit(75)
	}
	start := time.Now()
	host, _ := os.Hostname()
	_, _ = f.WriteAt(fmt.Appendf(nil, "%s %d %s\n", host, os.Getpid(), start.Format(time.RFC3339Nano)), 0)
	return f, host, start
}

// startGuard starts the guard from this program's image, holding a copy
// of the lock, and returns its PID and the pipe end whose closing tells it
// to go.
func startGuard(lock *os.File) (int, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		os.Exit(125)
	}
	guard, err := syscall.ForkExec("/proc/self/exe", []string{os.Args[0], GuardArg}, &syscall.ProcAttr{
		Files: []uintptr{0, 1, 2, r.Fd(), lock.Fd()}})
	if err != nil {
		os.Exit(125)
	}
	r.Close()
	return guard, w
}

// wait4 waits for pid, retrying on EINTR.
func wait4(pid int, ws *syscall.WaitStatus) {
	for {
		if _, err := syscall.Wait4(pid, ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}

// newCgroup makes a sub-cgroup of this process's own cgroup v2 (under
// /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid hierarchy) and
// opens it; it exits 125 when it cannot.
func newCgroup() (string, int) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		os.Exit(125)
	}
	_, own, ok := strings.Cut(string(b), "0::")
	if !ok {
		os.Exit(125)
	}
	own, _, _ = strings.Cut(own, "\n")
	for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(mnt, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		dir := filepath.Join(mnt, own, "designfloor-"+strconv.Itoa(os.Getpid()))
		if unix.Mkdir(dir, 0o755) != nil {
			continue
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			os.Exit(125)
		}
		return dir, fd
	}
	os.Exit(125)
	return "", -1
}

// awaitEmpty returns once the cgroup dir has no process left: its
// cgroup.events says "populated 0" (the kernel wakes a poll of it with
// POLLPRI on a change).
func awaitEmpty(dir string) {
	fd, err := unix.Open(filepath.Join(dir, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	buf := make([]byte, 256)
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil || bytes.Contains(buf[:n], []byte("populated 0")) {
			return
		}
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}, -1)
	}
}

// appendLine appends line to the file path, creating it.
func appendLine(path string, line []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(line)
	f.Close()
}
