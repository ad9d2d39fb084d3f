// Command designfloor is the floor of leaderrun's design on the file store,
// which scripts/bench.sh measures leaderrun against beside the floor of a
// plain Go wrapper: every step a file run's promises need, each done the
// cheapest way Go allows, and nothing else (no command line, no logging, no
// renewal, no checks, no error messages).
//
//  1. the lock: flock(LOCK_EX|LOCK_NB) on FILE (or exit 75), and the
//     holder's record written into it (what status reads);
//  2. the guard: a second process from this program's own image, started
//     before the child and not waited for, holding a copy of the lock and
//     a pipe whose end tells it that its parent is gone (leaderrun's guard
//     also kills the tree then; this one only exits);
//  3. the cgroup: a sub-cgroup of this program's own, the child cloned
//     into it (CLONE_INTO_CGROUP), and after the child's exit its
//     "populated 0" awaited and the cgroup removed;
//  4. the child in its own process group with a parent-death signal;
//  5. the run history: one line appended to FILE.runs once the child runs,
//     one when it has ended.
//
// It exits with the child's status. Without a writable cgroup v2 hierarchy
// it exits 125, so the benchmark leaves its row out.
//
//	designfloor FILE COMMAND [ARGS...]
package main

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

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-guard" {
		// The guard: fd 3 is the pipe from its parent, fd 4 the lock.
		var b [1]byte
		_, _ = unix.Read(3, b[:])
		return
	}
	f, err := os.OpenFile(os.Args[1], os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(125)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		os.Exit(75)
	}
	start := time.Now()
	host, _ := os.Hostname()
	_, _ = f.WriteAt(fmt.Appendf(nil, "%s %d %s\n", host, os.Getpid(), start.Format(time.RFC3339Nano)), 0)

	// The guard and the child are started with syscall.ForkExec, as
	// leaderrun starts them: os/exec's first start forks a process of its
	// own to probe for pidfds.
	r, w, err := os.Pipe()
	if err != nil {
		os.Exit(125)
	}
	guard, err := syscall.ForkExec("/proc/self/exe", []string{os.Args[0], "-guard"}, &syscall.ProcAttr{
		Files: []uintptr{0, 1, 2, r.Fd(), f.Fd()}})
	if err != nil {
		os.Exit(125)
	}
	r.Close()

	cg, cgfd := newCgroup()
	argv0, err := exec.LookPath(os.Args[2])
	if err != nil {
		os.Exit(127)
	}
	child, err := syscall.ForkExec(argv0, os.Args[2:], &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, UseCgroupFD: true, CgroupFD: cgfd}})
	if err != nil {
		_ = unix.Rmdir(cg)
		os.Exit(126)
	}
	runs := os.Args[1] + ".runs"
	appendLine(runs, fmt.Appendf(nil, "%s %s start\n", host, start.Format(time.RFC3339Nano)))
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(child, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	awaitEmpty(cg)
	_ = unix.Rmdir(cg)
	appendLine(runs, fmt.Appendf(nil, "%s %s end %d\n", host, time.Now().Format(time.RFC3339Nano), code))
	w.Close()
	for {
		if _, err := syscall.Wait4(guard, nil, 0, nil); err != syscall.EINTR {
			break
		}
	}
	os.Exit(code)
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
