package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
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

// openTerminal opens the controlling terminal if leaderrun is a job of a
// shell in charge of that terminal, or returns nil and why not (no
// controlling terminal: ""). Whether the child gets the terminal depends on
// the controlling terminal and its foreground group, not on stdin alone:
// `cat f | leaderrun -- less` must give less the terminal it reads keys from.
// But a background job of a shell without job control (`leaderrun … &` in a
// script, `nohup leaderrun … &`) shares the script's process group, which is
// the terminal's foreground group while the script runs: the terminal is not
// its to take (see jobless).
func openTerminal() (*terminal, string) {
	// O_NONBLOCK: never wait for a carrier; the descriptor is only used
	// for ioctls.
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "" // ENXIO: no controlling terminal
	}
	if why := jobless(); why != "" {
		unix.Close(fd)
		return nil, why
	}
	return &terminal{fd: fd, pgrp: unix.Getpgrp()}, ""
}

// jobless says why leaderrun, which has a controlling terminal, must leave
// it alone, or "" if leaderrun is a job that may take the terminal when it is
// in the foreground: its stdin is the controlling terminal (a job started
// in the background by a shell without job control has /dev/null, and nohup
// redirects a terminal away), or a job-control shell put it in a process
// group of its own (its parent, in the same session, is in another group:
// `cat f | leaderrun -- less`), or it leads the terminal's session. A
// leaderrun whose parent died (a start script that ran `leaderrun … &` and
// exited: leaderrun now belongs to init) is no job of anyone's, whatever
// group still has the foreground.
func jobless() string {
	if _, err := unix.IoctlGetInt(0, unix.TIOCGSID); err == nil {
		return "" // TIOCGSID answers only on the caller's controlling terminal
	}
	self, ok := readProcStat("self")
	if !ok {
		return "cannot read /proc/self/stat"
	}
	if self.session == os.Getpid() {
		return ""
	}
	parent, ok := readProcStat(strconv.Itoa(os.Getppid()))
	if ok && parent.session == self.session && parent.pgrp != self.pgrp {
		return ""
	}
	return "stdin is not the terminal and leaderrun is not a job of its own (a background job of a script, or nohup)"
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

// restore runs once the child has exited: if the child's group still has
// the foreground, or the child gave it to a group that has ended since,
// our group (which exists: leaderrun is in it) gets it back and, if
// restoreState, the modes the terminal had when it was handed over are put
// back, as shells do for a job killed by a signal (raw mode, no echo). A
// terminal that some other live group has (leaderrun was sent to the
// background, or its shell took the terminal back when the job it started
// leaderrun in ended) is left alone: taking it from a shell would make the
// shell's next read fail, and an interactive shell exits on that.
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
	if t.ours(fg) || fg <= 0 || (fg != childPgid && !(t.handed && groupGone(fg))) {
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

// groupGone reports whether process group pgid has no member left.
func groupGone(pgid int) bool {
	return errors.Is(unix.Kill(-pgid, 0), unix.ESRCH)
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
