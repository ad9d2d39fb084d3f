// Command floor is the floor of a Go wrapper that the start-up benchmark measures
// leaderrun against: it takes a flock on FILE (or exits 75) and runs
// COMMAND in its own process group with a parent-death signal, then exits
// with its status. No lease, no guard, no renewal.
//
//	floor FILE COMMAND [ARGS...]
package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	f, err := os.OpenFile(os.Args[1], os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(125)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		os.Exit(75)
	}
	c := exec.Command(os.Args[2], os.Args[3:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var exit *exec.ExitError
	if err := c.Run(); errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	} else if err != nil {
		os.Exit(127)
	}
}
