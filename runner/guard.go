package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrGuardDied is the cause of a run's end when the guard process died: with
// it gone, leaderrun could no longer keep its promise should it die or freeze
// itself, so it stops the child as on lease loss.
var ErrGuardDied = errors.New("the guard process died")

// ErrGuardHandshake is returned by Guard.Ready when the guard did not say
// it is ready in time: it is not a guard of this build (or not a guard at
// all), and a guard that has not completed its handshake is no guard.
var ErrGuardHandshake = errors.New("the guard did not complete its handshake")

// Guard is leaderrun's side of the guard process: a second process, in a
// process group of its own and deaf to the signals leaderrun forwards, that knows
// the child's process group (or cgroup) and the lease's current stop and
// kill points, and enforces them should leaderrun die or freeze:
//
//   - leaderrun's end of the socket closes without Disarm (leaderrun was
//     SIGKILLed, OOM-killed, crashed): the guard SIGKILLs the tree at once and
//     waits until it is gone, and only then closes the lock descriptors it
//     holds (file store), so the kernel lock outlives every process of the
//     tree;
//   - the stop point E−K−G passes without a newer E (leaderrun frozen): the
//     guard sends the stop signal (then SIGCONT), and SIGKILL at E−K, exactly
//     as leaderrun would. A passed point is never moved back.
//
// Methods are safe for concurrent use; Until never blocks. The zero value is
// not usable: call StartGuard.
type Guard struct {
	pid  int // the guard's process; reaped by Disarm alone, so never reused before
	conn *seqConn
	self bool // runs from this program's own image, or one vouched for
	// hupIgnored: SIGHUP was ignored in this process when the guard was
	// forked, so the guard ignores it from its exec on (IgnoresHangup).
	hupIgnored bool

	mu       sync.Mutex
	until    time.Duration // the latest E to send; coalesced
	sent     time.Duration
	disarmed bool
	reaped   bool          // a Disarm call took the reap on
	wake     chan struct{} // has room for one: a new E is pending
	quit     chan struct{}
	died     chan struct{} // closed when the guard's end closes, or it stops, before Disarm
	stopped  bool          // the guard was stopped (SIGSTOP), not ended
	diedOnce sync.Once
	armed    chan struct{} // closed once the child's group was sent (tests)
	ready    chan struct{} // closed when the guard said "ready PROTOCOL"
	armOnce  sync.Once
	wg       sync.WaitGroup
}

// StartGuard starts the guard process (this program, re-run with GuardArg0)
// and returns once it exists. It does not wait for the guard to be ready:
// messages queue in the socket, and if the guard dies before reading them,
// Died closes.
func StartGuard() (*Guard, error) { return StartGuardProgram(selfImage) }

// selfImage is the running program's own image: the very file it was
// started from, even if that path has since been replaced on disk.
const selfImage = "/proc/self/exe"

// GuardProtocol names the protocol this build's guard and its client
// speak: a program that says its guard speaks it can be trusted with
// StartTrustedGuardProgram.
func GuardProtocol() string { return guardProtocol }

// StartTrustedGuardProgram is StartGuardProgram for a program the caller
// knows to speak GuardProtocol (a store program's guard runs from the
// image of the leaderrun that dispatched to it, which said it does): like
// StartGuard's, its guard is SameBuild.
func StartTrustedGuardProgram(path string) (*Guard, error) {
	g, err := StartGuardProgram(path)
	if err == nil {
		g.self = true
	}
	return g, err
}

// StartGuardProgram is StartGuard with the guard run from the program at
// path, which must be a leaderrun program of the same build: a store
// program (cmd/leaderrun-*) runs leaderrun's own, smaller program as its
// guard, whose start-up costs a third of its own.
func StartGuardProgram(path string) (*Guard, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("guard socket: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "guard-peer")
	defer theirs.Close()
	c, err := newSeqConn(fds[0], "guard-conn")
	if err != nil {
		return nil, fmt.Errorf("guard socket: %w", err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("guard: %w", err)
	}
	defer devnull.Close()
	// A process group of its own, in leaderrun's session: a kill of
	// leaderrun's group, and the terminal's signals (which go to the
	// foreground group), do not reach it. Not a session of its own: the
	// guard's group is then orphaned by leaderrun's death, and the kernel
	// sends SIGHUP (ignored) and SIGCONT to a group that becomes orphaned
	// with a stopped member, so a guard stopped in the instant leaderrun is
	// SIGKILLed still runs, reads the closed socket and kills the tree.
	sys := &syscall.SysProcAttr{Setpgid: true}
	hupIgnored := signal.Ignored(syscall.SIGHUP)
	pid, err := spawn(path, []string{GuardArg0, guardProtocol}, []string{"GOMAXPROCS=1"}, "/",
		[]*os.File{devnull, devnull, os.Stderr, theirs}, sys)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("start the guard: %w", err)
	}
	g := &Guard{pid: pid, conn: c, self: path == selfImage, hupIgnored: hupIgnored, wake: make(chan struct{}, 1),
		quit: make(chan struct{}), died: make(chan struct{}), armed: make(chan struct{}), ready: make(chan struct{})}
	g.wg.Add(3)
	go g.send()
	go g.watch()
	go g.watchStop()
	return g, nil
}

// Ready waits until the guard has said it is ready and speaks this build's
// protocol. It returns an error wrapping ErrGuardDied when the guard ended
// (or was disarmed) first, or ErrGuardHandshake when ctx ends first. Unless
// SameBuild, run no child before it returns nil.
func (g *Guard) Ready(ctx context.Context) error {
	select {
	case <-g.ready:
		return nil
	case <-g.died:
		return fmt.Errorf("%w before its handshake", ErrGuardDied)
	case <-g.quit:
		return fmt.Errorf("%w: disarmed before its handshake", ErrGuardDied)
	case <-ctx.Done():
		return ErrGuardHandshake
	}
}

// SameBuild reports whether the guard runs from this program's own image
// (StartGuard), so that it is a guard of this build by construction, or
// from one vouched for (StartTrustedGuardProgram). Its
// handshake can then fail only by the guard dying or hanging, and the child
// may start before it completes (the caller still waits for Ready in the
// background and stops the child if it fails), because a guard that has
// not yet said it is ready acts all the same should leaderrun die:
//
//   - StartGuard returns only once the guard process exists and has
//     exec'd (spawn waits for the exec), in a process group of its own,
//     holding its end of the socket pair;
//   - every message (the cgroup and timing before the child starts, the
//     child's group the moment it has started, each deadline) is queued
//     in the guard's end of the socket whether or not it reads yet, and
//     stays there when leaderrun's end closes;
//   - so a guard still starting up when leaderrun dies reads, once it
//     runs, everything leaderrun sent, then the end of the socket, and
//     kills the tree it was told of exactly as a ready guard would (a
//     message write that fails there means the guard died, which Died
//     reports to leaderrun, if alive, as before).
//
// A guard from another program (StartGuardProgram, a store program's
// guard) may be of another build, which only its handshake can tell: its
// caller must wait for Ready before starting the child.
//
// Nor may the child start before Ready unless IgnoresHangup: a guard that
// is stopped (SIGSTOP) when leaderrun dies is woken by the kernel with
// SIGHUP and SIGCONT (its process group is orphaned then), and a guard
// still starting up, before GuardMain ignores SIGHUP, would die of the
// SIGHUP and leave the tree.
func (g *Guard) SameBuild() bool { return g.self }

// IgnoresHangup reports whether the guard ignores SIGHUP from its exec on:
// it was forked while this process ignored SIGHUP (signal.Ignore), and
// SIG_IGN survives execve (Go's runtime keeps an inherited SIG_IGN for
// SIGHUP). Otherwise it ignores SIGHUP only once it runs GuardMain, about a
// millisecond later, which Ready confirms.
func (g *Guard) IgnoresHangup() bool { return g.hupIgnored }

// PID returns the guard's process ID.
func (g *Guard) PID() int { return g.pid }

// Died is closed when the guard process ends (or its socket breaks), or is
// stopped (Stopped then reports true), before Disarm: a stopped guard would
// not act should leaderrun die, so it is no guard.
func (g *Guard) Died() <-chan struct{} { return g.died }

// Stopped reports whether Died closed because the guard was stopped (a
// SIGSTOP from a process of the same user, such as the child) rather than
// ended. Disarm still ends it: SIGKILL reaches a stopped process.
func (g *Guard) Stopped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped
}

// Hold passes the guard a duplicate of f's descriptor to keep open until the
// child's tree is gone (the file store's lock). The guard has it once Hold
// returns, even if leaderrun dies right after.
func (g *Guard) Hold(f *os.File) error {
	return g.msg("hold", unix.UnixRights(int(f.Fd())))
}

// Timing tells the guard the stop signal, the grace G and the kill bound K.
// The guard sends its own stop signal only if leaderrun has not said it did
// within a short slack after the stop point (so a healthy leaderrun's child
// does not get the signal twice); its SIGKILL at E−K has no slack.
func (g *Guard) Timing(stop syscall.Signal, grace, killBound time.Duration) error {
	slack := min(grace/2, 50*time.Millisecond)
	return g.msg(fmt.Sprintf("timing %d %d %d %d", stop, grace, killBound, slack), nil)
}

// Cgroup tells the guard the child's cgroup, before the child starts.
func (g *Guard) Cgroup(c *Cgroup) error { return g.msg("cgroup "+c.Path(), nil) }

// Arm tells the guard the child's process group; Run calls it the moment the
// child has started. Until then only Pdeathsig covers the child, so in the
// instant between the child's exec and this message a SIGKILL of leaderrun
// leaves grandchildren forked in that instant running, unless the child runs
// in a cgroup (which the guard knows before the child starts).
func (g *Guard) Arm(pgid int) error {
	err := g.msg("pgid "+strconv.Itoa(pgid), nil)
	g.armOnce.Do(func() { close(g.armed) })
	return err
}

// Check tells the guard the process group of a health check that has just
// started: should leaderrun die, the guard kills it with the child's tree
// (before the message, Pdeathsig covers the check's shell only, which is
// why a check in a process group waits at a gate until it is sent). Checked
// must follow once the check's group is killed and before its shell is
// reaped, while the group's ID cannot have been reused.
func (g *Guard) Check(pgid int) error { return g.msg("check "+strconv.Itoa(pgid), nil) }

// Checked tells the guard that the health check of process group pgid has
// ended (see Check).
func (g *Guard) Checked(pgid int) { _ = g.msg("checked "+strconv.Itoa(pgid), nil) }

// Until hands the guard E, the boot-clock reading until which the lease is
// certainly ours, after a confirmed acquisition or renewal. It never blocks:
// values are coalesced and the largest is sent by a goroutine of the Guard.
func (g *Guard) Until(e time.Duration) {
	g.mu.Lock()
	if e > g.until {
		g.until = e
	}
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Stopping tells the guard leaderrun has begun the stop sequence itself.
func (g *Guard) Stopping() { _ = g.msg("stopping", nil) }

// Gone tells the guard the child's tree is confirmed gone: it must no longer
// signal the process group, whose ID may now be reused.
func (g *Guard) Gone() { _ = g.msg("gone", nil) }

// Disarm ends the guard once the tree is gone and the lease released (or
// when no child was started). By then the guard has nothing left to do (the
// lock it may hold was unlocked by the release, which drops the flock for
// every duplicate), so it is simply SIGKILLed and reaped: that does not wait
// for a guard still starting up, which a short run would otherwise pay for.
// Disarm after Dismiss only reaps.
func (g *Guard) Disarm() {
	if g.end(true) {
		reap(g.pid)
		g.conn.Close()
		g.wg.Wait()
	}
}

// Dismiss is Disarm's first half: it SIGKILLs the guard and returns without
// waiting for it to be gone, so that leaderrun's last steps (the run's end
// in the history) overlap the guard's exit; Disarm then reaps it. Only for
// when Disarm may be called: the tree gone and the lease released.
func (g *Guard) Dismiss() { g.end(false) }

// end SIGKILLs the guard the first time it is called; with reap, it
// reports whether the caller is the first to reap it.
func (g *Guard) end(reap bool) (reaper bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.disarmed {
		g.disarmed = true
		close(g.quit)
		_ = unix.Kill(g.pid, unix.SIGKILL) // not yet reaped: end comes first
	}
	if !reap || g.reaped {
		return false
	}
	g.reaped = true
	return true
}

func (g *Guard) msg(s string, oob []byte) error {
	err := g.conn.WriteMsg([]byte(s), oob)
	if err != nil {
		return fmt.Errorf("tell the guard %q: %w", s, err)
	}
	return nil
}

// send writes the latest E whenever it grows.
func (g *Guard) send() {
	defer g.wg.Done()
	for {
		select {
		case <-g.quit:
			return
		case <-g.wake:
		}
		g.mu.Lock()
		e, sent := g.until, g.sent
		g.sent = e
		g.mu.Unlock()
		if e > sent {
			_ = g.msg("until "+strconv.FormatInt(int64(e), 10), nil)
		}
	}
}

// watch closes died when the guard's end of the socket closes before Disarm.
func (g *Guard) watch() {
	defer g.wg.Done()
	buf := make([]byte, 64)
	for {
		n, _, err := g.conn.ReadMsg(buf, nil)
		if err == nil && n > 0 {
			if string(buf[:n]) == guardReady {
				close(g.ready)
			}
			continue
		}
		g.die(false)
		return
	}
}

// die closes died unless the guard was disarmed; stopped records why.
func (g *Guard) die(stopped bool) {
	g.mu.Lock()
	disarmed := g.disarmed
	if !disarmed {
		g.stopped = g.stopped || stopped
	}
	g.mu.Unlock()
	if !disarmed {
		g.diedOnce.Do(func() { close(g.died) })
	}
}

// cldStopped is si_code CLD_STOPPED of waitid(2): the child was stopped.
const cldStopped = 5

// watchStop closes died when the guard is stopped: the guard is
// leaderrun's child, so waitid(2) with WSTOPPED reports the stop as an
// event (no polling of /proc). WNOWAIT leaves its exit for Disarm to reap;
// after that reap waitid fails with ECHILD and the watch ends.
func (g *Guard) watchStop() {
	defer g.wg.Done()
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, g.pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err == nil && info.Code == cldStopped {
			g.die(true)
		}
		return
	}
}

// reap waits for the process pid, a child of this one, to end and reaps it.
func reap(pid int) {
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			return
		}
	}
}
