package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// terminal is leaderrun's controlling terminal, which it hands to the child
// while leaderrun is in the terminal's foreground, and what must be put back.
// Only Run's goroutine touches it; every method accepts a nil terminal (no
// controlling terminal) and then does nothing.
type terminal struct {
	fd     int           // our own descriptor for /dev/tty (close-on-exec)
	pgrp   int           // our process group
	state  *unix.Termios // the modes when the terminal was last handed to the child
	child  *unix.Termios // the child's modes, saved when they differed at a stop
	handed bool          // the child's group was made the foreground group
}

// openTerminal opens the controlling terminal, or returns nil if there is
// none. Whether the child gets the terminal depends on the controlling
// terminal and its foreground group, not on stdin: `cat f | leaderrun --
// less` must give less the terminal it reads keys from.
func openTerminal() *terminal {
	// O_NONBLOCK: never wait for a carrier; the descriptor is only used
	// for ioctls.
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // ENXIO: no controlling terminal
	}
	return &terminal{fd: fd, pgrp: unix.Getpgrp()}
}

func (t *terminal) close() {
	if t != nil {
		unix.Close(t.fd)
	}
}

// foreground returns the terminal's foreground process group, or -1.
func (t *terminal) foreground() int {
	if t == nil {
		return -1
	}
	fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	if err != nil {
		return -1 // EIO once the terminal hung up
	}
	return fg
}

// tostop reports whether the terminal stops background writers (stty
// tostop).
func (t *terminal) tostop() bool {
	if t == nil {
		return false
	}
	st, err := unix.IoctlGetTermios(t.fd, unix.TCGETS)
	return err == nil && st.Lflag&unix.TOSTOP != 0
}

// ours reports whether fg, a foreground group, is leaderrun's.
func (t *terminal) ours(fg int) bool { return t != nil && fg == t.pgrp }

// prepareStart readies a hand-over to a child not yet started (which
// becomes the foreground group itself, SysProcAttr.Foreground): it reports
// whether leaderrun is in the foreground and, if so, records the modes.
func (t *terminal) prepareStart() bool {
	if t == nil || !t.ours(t.foreground()) {
		return false
	}
	state, err := unix.IoctlGetTermios(t.fd, unix.TCGETS)
	if err != nil {
		return false
	}
	t.state, t.handed = state, true
	return true
}

// handOver makes pgid the foreground group, after putting back the modes the
// child had when leaderrun took the terminal back at a stop, if it changed
// them (as zsh does for a job it continues in the foreground).
func (t *terminal) handOver(pgid int) error {
	return withSIGTTOUBlocked(func() error {
		if state, err := unix.IoctlGetTermios(t.fd, unix.TCGETS); err == nil {
			t.state = state
		}
		if t.child != nil {
			if err := unix.IoctlSetTermios(t.fd, unix.TCSETS, t.child); err != nil {
				return fmt.Errorf("restore the child's terminal settings: %w", err)
			}
			t.child = nil
		}
		if err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgid); err != nil {
			return fmt.Errorf("give the terminal to the child: %w", err)
		}
		t.handed = true
		return nil
	})
}

// takeBack makes our group the foreground group again when the child has
// stopped, and puts back the modes the terminal had when it was handed over
// if the child left them changed (saving the child's for handOver).
func (t *terminal) takeBack() error {
	return withSIGTTOUBlocked(func() error {
		t.handed = false
		if err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp); err != nil {
			return fmt.Errorf("take the terminal back: %w", err)
		}
		cur, err := unix.IoctlGetTermios(t.fd, unix.TCGETS)
		if err != nil || t.state == nil || *cur == *t.state {
			return nil
		}
		t.child = cur
		if err := unix.IoctlSetTermios(t.fd, unix.TCSETS, t.state); err != nil {
			return fmt.Errorf("restore terminal settings: %w", err)
		}
		return nil
	})
}

// restore runs once the child has exited: if the child's group (or a group
// it gave the terminal to) still has the foreground, our group gets it back
// and, if restoreState, the modes the terminal had when it was handed over
// are put back, as shells do for a job killed by a signal (raw mode, no
// echo). A terminal that is not the child's to give back (leaderrun was sent
// to the background) is left alone.
//
// Members of our own group that read the terminal while the child held it
// (the other commands of a pipeline, as in `leaderrun -- make | less`) were
// stopped by SIGTTIN or SIGTTOU, and nobody else would continue them: they
// get a SIGCONT with the terminal.
func (t *terminal) restore(childPgid int, restoreState bool) error {
	if t == nil {
		return nil
	}
	fg := t.foreground()
	if t.ours(fg) || fg == -1 || (fg != childPgid && !t.handed) {
		return nil
	}
	return withSIGTTOUBlocked(func() error {
		t.handed = false
		if err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp); err != nil {
			return fmt.Errorf("restore foreground process group: %w", err)
		}
		var err error
		if restoreState && t.state != nil {
			// TCSETS, not TCSETSW: waiting for output to drain would hang
			// on a terminal stopped with Ctrl-S, and the lease with it.
			if err = unix.IoctlSetTermios(t.fd, unix.TCSETS, t.state); err != nil {
				err = fmt.Errorf("restore terminal settings: %w", err)
			}
		}
		if groupStopped(t.pgrp) {
			_ = unix.Kill(-t.pgrp, unix.SIGCONT)
		}
		return err
	})
}

// logErr logs a failed terminal operation: at debug level once the terminal
// has hung up (EIO), when nothing can be restored, else as a warning.
func (t *terminal) logErr(log *slog.Logger, err error) {
	if errors.Is(err, unix.EIO) || errors.Is(err, unix.ENOTTY) {
		log.Debug(err.Error())
		return
	}
	log.Warn(err.Error())
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
		return fmt.Errorf("block SIGTTOU: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return fn()
}

func sigaddset(set *unix.Sigset_t, sig unix.Signal) {
	n := uint(sig) - 1
	bits := uint(unsafe.Sizeof(set.Val[0])) * 8 // 64 or 32 depending on GOARCH
	set.Val[n/bits] |= 1 << (n % bits)
}
