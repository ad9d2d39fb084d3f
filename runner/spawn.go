package runner

import (
	"os"
	"runtime"
	"syscall"
)

// spawn starts the program at path, with files as its descriptors 0, 1, 2,
// 3 …, and returns its PID once it has exec'd (a failed exec is its error).
// It is the syscall.ForkExec that os/exec's Start ends in, without what
// this package does not use and every run would pay for: os.StartProcess
// opens a pidfd for each process and, on its first call, forks a process
// of its own to check that the kernel can (docs/performance.md, start-up
// cost); the guard and the child are waited for
// by their PIDs, which stay theirs until this package reaps them. A nil
// env is this process's environment; nothing is looked up on PATH (path
// is resolved already).
func spawn(path string, args, env []string, dir string, files []*os.File, sys *syscall.SysProcAttr) (int, error) {
	if env == nil {
		env = os.Environ()
	}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{Dir: dir, Env: env, Files: fds, Sys: sys})
	runtime.KeepAlive(files)
	if err != nil {
		// The error os/exec gives, so that messages stay as they were.
		return 0, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	return pid, nil
}
