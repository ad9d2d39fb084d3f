package runner

import (
	"bytes"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// childState is a change of the child's state that wait4 reported before its
// exit: stopped by sig, or continued.
type childState struct {
	stopped bool
	sig     syscall.Signal // the signal that stopped it
}

// waitResult is how the child ended: its wait status, or the error of wait4.
type waitResult struct {
	status unix.WaitStatus
	err    error
}

// waitChild waits for the child pid to exit and returns its status. Stops
// and continues before the exit are sent on states, one at a time (the send
// blocks until the supervisor takes it, and until then the child stays
// unreaped, so its group ID cannot be reused). It must run on the goroutine
// locked to the thread that started the child (see the package comment).
func waitChild(pid int, states chan<- childState) waitResult {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WUNTRACED|unix.WCONTINUED, nil)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return waitResult{err: err}
		case ws.Stopped():
			states <- childState{stopped: true, sig: ws.StopSignal()}
		case ws.Continued():
			states <- childState{}
		default:
			return waitResult{status: ws}
		}
	}
}

// terminalStop reports whether sig is one of the job-control stops a
// terminal sends (Ctrl-Z, a background read or write).
func terminalStop(sig syscall.Signal) bool {
	return sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU
}

// childChanged handles a stop or continue of the child reported by wait4.
//
// A child stopped by a job-control signal (or stopped in any way while it
// holds the terminal) takes leaderrun with it, as sudo does: leaderrun takes
// the terminal back and stops itself, so the shell sees its job stopped and
// gets its prompt back; continued (fg or bg), leaderrun continues the group
// (see continued). A SIGSTOP from someone else while the child is in the
// background leaves leaderrun running and the lease renewed.
func (r *run) childChanged(st childState) {
	if !st.stopped {
		r.childStopped = false
		r.log.Debug("child continued")
		return
	}
	r.childStopped = true
	r.log.Debug("child stopped", "signal", st.sig)
	if r.killC != nil || r.res.Killed {
		// The group has been told to end and has had its SIGCONT; SIGKILL
		// at the end of the grace ends a stopped group as well. Continuing
		// it again could loop (a background read stops it at once).
		return
	}
	fg := r.term.foreground()
	if (st.sig == syscall.SIGTTIN || st.sig == syscall.SIGTTOU) && r.term.ours(fg) && r.handOver() {
		// The child wants the terminal and leaderrun holds it (it was
		// continued in the foreground by someone else's SIGCONT, or never
		// gave the terminal away): it has it now, and goes on.
		r.continueGroup()
		return
	}
	if !terminalStop(st.sig) && fg != r.pgid {
		return
	}
	if why := r.cannotSuspend(); why != "" {
		r.log.Debug("cannot stop with the child", "reason", why)
		if st.sig == syscall.SIGTSTP {
			// Nobody could continue a stopped job here: Ctrl-Z does
			// nothing, as for any job of an orphaned process group. Other
			// stops stay (a background read would only stop it again), and
			// INT, TERM and HUP still end the group.
			r.continueGroup()
		}
		return
	}
	if fg == r.pgid {
		if err := r.term.takeBack(); err != nil {
			r.term.logErr(r.log, err)
		}
	}
	r.suspended = true
	r.log.Debug("stopping with the child", "signal", st.sig)
	// SIGTSTP whatever stopped the child: SIGTTIN and SIGTTOU are caught
	// (notifyJobSignals), SIGSTOP is not discarded for an orphaned process
	// group, and SIGTSTP keeps its default action (the runtime cannot give
	// a signal back its default once it was caught). The shell reports
	// "Stopped".
	if err := unix.Kill(os.Getpid(), syscall.SIGTSTP); err != nil {
		r.log.Warn("stop leaderrun", "err", err)
	}
}

// notifyJobSignals catches, for the whole call, SIGCONT (leaderrun continued
// after it stopped with the child, or the shell's fg, which gives the child
// the terminal), SIGTTIN and SIGTTOU. SIGTTIN and SIGTTOU reach leaderrun's
// own process group, which it shares with the other commands of a
// pipeline: in `leaderrun -- make | less`, less reading or setting up the
// terminal that make holds sends them to leaderrun too, and a stopped
// leaderrun would stop renewing the lease while make runs on. Caught signals
// get their default action back in the child at exec (ignored ones would
// not).
//
// SIGTTOU is left alone when the terminal has TOSTOP set: leaderrun's own
// messages written in the background would then raise it again at every
// retry of the write, where the default action stops leaderrun instead.
// Without a controlling terminal (cron, systemd, CI), SIGTTIN and SIGTTOU
// are left alone too: the kernel raises them only for a controlling
// terminal, which no process of leaderrun's session then has, and catching
// each costs a round trip to the Go runtime's signal-mask thread. SIGCONT
// is then caught once the child has started (notifyContinue): its default
// action is none, and without a terminal to hand over it matters only to
// a stopped child, which supervise alone can see; catching it just before
// the child's fork delayed the child's start.
func (r *run) notifyJobSignals() {
	r.jobSigs = make(chan os.Signal, 4)
	if r.term == nil && r.jobless == "" { // no /dev/tty (openTerminal)
		return
	}
	catch := []os.Signal{syscall.SIGCONT, syscall.SIGTTIN}
	if !r.term.tostop() {
		catch = append(catch, syscall.SIGTTOU)
	}
	signal.Notify(r.jobSigs, catch...)
	r.contCaught = true
}

// notifyContinue catches SIGCONT once the child has started, where
// notifyJobSignals left it (no controlling terminal).
func (r *run) notifyContinue() {
	if !r.contCaught {
		signal.Notify(r.jobSigs, syscall.SIGCONT)
	}
}

// jobSignal handles a job-control signal sent to leaderrun.
func (r *run) jobSignal(s os.Signal) {
	if s == syscall.SIGCONT {
		r.continued()
		return
	}
	// Another member of leaderrun's group used the terminal the child
	// holds; it stays stopped until leaderrun takes the terminal back
	// (terminal.restore) or the job is stopped and continued.
	r.log.Debug("ignored", "signal", s)
}

// continued handles a SIGCONT to leaderrun: after a stop that followed the
// child's (the shell's fg or bg, or a kill -CONT), it gives the terminal to
// the child's group if leaderrun is now in its foreground, and continues the
// group if it was stopped.
func (r *run) continued() {
	wasSuspended := r.suspended
	r.suspended = false
	switch fg := r.term.foreground(); {
	case r.term == nil:
	case r.term.ours(fg):
		r.handOver()
	default:
		// Moved to the background while stopped (bg): the terminal is not
		// ours to take back at the end.
		r.term.handed = fg == r.pgid
	}
	if wasSuspended || r.childStopped {
		r.log.Debug("continuing child", "foreground", r.term != nil && r.term.handed)
		r.continueGroup()
	}
}

// handOver makes the child's group the terminal's foreground group and
// reports whether it did.
func (r *run) handOver() bool {
	if r.term == nil {
		return false
	}
	if err := r.term.handOver(r.pgid); err != nil {
		r.term.logErr(r.log, err)
		return false
	}
	return true
}

func (r *run) continueGroup() {
	if err := r.signalTree(syscall.SIGCONT); err != nil {
		r.log.Warn("send SIGCONT", "err", err)
	}
}

// cannotSuspend says why leaderrun cannot stop itself with SIGTSTP, or "".
// A leaderrun that is not a job of a shell in charge of its terminal (a
// script's background job) has nobody to report the stop to and continue it.
func (r *run) cannotSuspend() string {
	if r.jobless != "" {
		return r.jobless
	}
	if signal.Ignored(syscall.SIGTSTP) {
		return "SIGTSTP is ignored"
	}
	orphaned, err := pgrpOrphaned(unix.Getpgrp())
	switch {
	case err != nil:
		return "cannot read /proc: " + err.Error()
	case orphaned:
		return "orphaned process group"
	}
	return ""
}

// terminating reports whether sig, forwarded to the group, asks it to end:
// after such a signal a stopped group is continued so that it can act on it.
func (r *run) terminating(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, r.cfg.StopSignal:
		return true
	}
	return false
}

// escalates reports whether sig, forwarded, starts the grace after which the
// group is SIGKILLed: INT, TERM and the stop signal, not HUP or QUIT, which
// daemons and runtimes use for reloads and thread dumps.
func (r *run) escalates(sig syscall.Signal) bool {
	return sig == syscall.SIGINT || sig == syscall.SIGTERM || sig == r.cfg.StopSignal
}

// procStat is the part of /proc/PID/stat that job control needs.
type procStat struct {
	state   byte
	ppid    int
	pgrp    int
	session int
}

func readProcStat(pid string) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// Fields after "(comm)": state ppid pgrp session ...; comm may contain
	// spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, false
	}
	var st procStat
	st.state = f[0][0]
	var e1, e2, e3 error
	st.ppid, e1 = strconv.Atoi(string(f[1]))
	st.pgrp, e2 = strconv.Atoi(string(f[2]))
	st.session, e3 = strconv.Atoi(string(f[3]))
	return st, e1 == nil && e2 == nil && e3 == nil
}

// eachProc calls fn for every process in /proc until fn returns false.
func eachProc(fn func(pid string, st procStat) bool) error {
	d, err := os.Open("/proc")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if st, ok := readProcStat(name); ok && !fn(name, st) {
			break
		}
	}
	return nil
}

// groupStopped reports whether a member of group pgid is stopped.
func groupStopped(pgid int) bool {
	stopped := false
	_ = eachProc(func(_ string, st procStat) bool {
		stopped = st.pgrp == pgid && st.state == 'T'
		return !stopped
	})
	return stopped
}

// pgrpOrphaned reports whether process group pgrp is orphaned (POSIX): no
// member has a parent in another group of the same session, so no shell can
// continue it, and the kernel discards SIGTSTP, SIGTTIN and SIGTTOU for it.
// As in the kernel, a parent that is init does not count.
func pgrpOrphaned(pgrp int) (bool, error) {
	orphaned := true
	err := eachProc(func(_ string, st procStat) bool {
		if st.pgrp != pgrp || st.state == 'Z' || st.ppid <= 1 {
			return true
		}
		parent, ok := readProcStat(strconv.Itoa(st.ppid))
		if ok && parent.pgrp != pgrp && parent.session == st.session {
			orphaned = false
		}
		return orphaned
	})
	return orphaned, err
}
