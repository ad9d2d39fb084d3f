package runner

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// terminal is the controlling terminal leaderrun hands to the child while it
// runs, and what must be put back afterwards.
type terminal struct {
	fd    int
	pgrp  int           // our process group, foreground when we started
	state *unix.Termios // terminal settings when we started
}

// foregroundTerminal returns the terminal on f if f is our controlling
// terminal and our process group is in its foreground; otherwise nil (not a
// terminal, another session's terminal, or we run in the background, where
// taking the terminal would steal it from the shell).
func foregroundTerminal(f *os.File) *terminal {
	fd := int(f.Fd())
	state, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP) // ENOTTY if not our ctty
	if err != nil || fg != unix.Getpgrp() {
		return nil
	}
	return &terminal{fd: fd, pgrp: fg, state: state}
}

// restore makes our group the foreground group again and, if restoreState,
// puts back the terminal settings a killed child may have left changed (raw
// mode, no echo), as shells do for a job that dies by a signal.
func (t *terminal) restore(restoreState bool) error {
	return withSIGTTOUBlocked(func() error {
		if err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp); err != nil {
			return fmt.Errorf("runner: restore foreground process group: %w", err)
		}
		if restoreState {
			if err := unix.IoctlSetTermios(t.fd, unix.TCSETSW, t.state); err != nil {
				return fmt.Errorf("runner: restore terminal settings: %w", err)
			}
		}
		return nil
	})
}

// withSIGTTOUBlocked runs fn with SIGTTOU blocked on the calling OS thread: a
// background process that calls tcsetpgrp or tcsetattr would otherwise be
// stopped by SIGTTOU. Blocking it on one locked thread, rather than ignoring
// it process-wide, leaves the rest of the program alone.
func withSIGTTOUBlocked(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	sigaddset(&set, unix.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return fmt.Errorf("runner: block SIGTTOU: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return fn()
}

func sigaddset(set *unix.Sigset_t, sig unix.Signal) {
	n := uint(sig) - 1
	bits := uint(unsafe.Sizeof(set.Val[0])) * 8 // 64 or 32 depending on GOARCH
	set.Val[n/bits] |= 1 << (n % bits)
}
