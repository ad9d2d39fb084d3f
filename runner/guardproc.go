package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/boottime"
)

// GuardArg0 is the argv[0] leaderrun gives the guard process; ps shows it.
// IsGuard checks for it.
const GuardArg0 = "leaderrun: guard"

// guardFD is the descriptor of the guard's end of the socket pair.
const guardFD = 3

// guardKillWait bounds how long the guard waits for the tree to vanish after
// SIGKILL before it gives up (and, on the file store, lets the lock go).
const guardKillWait = 30 * time.Second

// IsGuard reports whether a process with argv args (os.Args) was started as
// a guard (see StartGuard); such a process runs GuardMain from runner's init
// and never reaches main.
func IsGuard(args []string) bool { return len(args) == 2 && args[0] == GuardArg0 }

// A process started as the guard (IsGuard) is the guard from this
// package's initialisation on: it runs GuardMain and exits before the
// packages that import runner (the command line, its help and man-page
// renderers, a store's client) are initialised, so the guard's start-up,
// which runs beside every child's, pays for the runtime and what runner
// itself needs only. Go initialises a package after all it imports, and
// among those ready first the one whose import path sorts first, so
// runner comes before every importer of it.
func init() {
	if IsGuard(os.Args) {
		os.Exit(GuardMain(os.Args))
	}
}

// guardProtocol names the messages this build's guard and client exchange.
// It is the guard's argv[1]; a guard of another build refuses to start, so
// a mixed installation fails safe (leaderrun sees its guard die: exit 124)
// instead of misreading messages.
const guardProtocol = "protocol-3"

// guardReady is the guard's first message: it has started, speaks
// guardProtocol and reads its socket (Guard.Ready waits for it). A program
// that is not a guard of this build never sends it.
const guardReady = "ready " + guardProtocol

// GuardMain is the whole life of the guard process: it enforces the stop and
// kill points of one child tree on its own, so that they hold even when
// leaderrun is SIGKILLed, frozen or otherwise unscheduled. It returns the
// process's exit code. args is its argv (os.Args), which IsGuard accepted.
// See the package comment for what it does.
func GuardMain(args []string) int {
	// Forwarded and terminal signals are leaderrun's business; a dead log
	// reader must not kill the guard either.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGPIPE,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	if args[1] != guardProtocol {
		fmt.Fprintf(os.Stderr, "leaderrun guard: asked for guard %s, this program speaks %s: install leaderrun and its store programs from one build\n", args[1], guardProtocol)
		return 2
	}
	c, err := newSeqConn(guardFD, "guard")
	if err != nil {
		fmt.Fprintf(os.Stderr, "leaderrun guard: %v\n", err)
		return 2
	}
	// A failed write means leaderrun's end is already closed: the read
	// loop sees that at once and does what a closed end calls for (kill
	// the tree it was told of), so the error is not the guard's to act on.
	_ = c.WriteMsg([]byte(guardReady), nil)
	g := &guardProc{conn: c, clock: boottime.Boot{}}
	return g.run()
}

// guardProc is the guard's state; only its run loop touches it.
type guardProc struct {
	conn  *seqConn
	clock boottime.Clock

	pgid     int     // the child's process group; 0 until armed or once gone
	cg       *Cgroup // the child's cgroup, if any
	stopSig  syscall.Signal
	grace    time.Duration
	killB    time.Duration // K
	slack    time.Duration // how long to give leaderrun to send its own stop signal
	until    time.Duration // E; 0 means no expiry known
	stopSent bool          // the stop signal went out (by us or leaderrun)
	killed   bool
	held     []*os.File   // lock descriptors to hold until the tree is gone
	checks   map[int]bool // process groups of the health checks running
}

type guardMsg struct {
	fields []string
	files  []*os.File
	err    error // non-nil: the connection ended (io.EOF: leaderrun's end closed)
}

func (g *guardProc) run() int {
	msgs := make(chan guardMsg)
	quit := make(chan struct{})
	defer close(quit)
	go g.read(msgs, quit) // ends when the connection does or quit closes

	var (
		timer  context.CancelFunc
		fired  chan struct{}
		armedT time.Duration = -1
	)
	defer func() {
		if timer != nil {
			timer()
		}
	}()
	for {
		// Re-arm the one boot-clock timer for the next point, if it moved.
		if at, ok := g.nextPoint(); ok && at != armedT {
			if timer != nil {
				timer()
			}
			ctx, cancel := context.WithCancel(context.Background())
			timer, fired, armedT = cancel, make(chan struct{}), at
			go func(at time.Duration, fired chan struct{}) {
				if g.clock.SleepUntil(ctx, at) == nil {
					close(fired)
				}
			}(at, fired)
		} else if !ok && timer != nil {
			timer()
			timer, fired, armedT = nil, nil, -1
		}
		select {
		case m := <-msgs:
			if m.err != nil {
				return g.ownerGone()
			}
			g.handle(m)
		case <-fired:
			timer, fired, armedT = nil, nil, -1
			g.deadline()
		}
	}
}

// nextPoint is the boot-clock reading of the next thing to do.
func (g *guardProc) nextPoint() (time.Duration, bool) {
	if g.until == 0 || g.killed || (g.pgid == 0 && g.cg == nil) {
		return 0, false
	}
	if !g.stopSent {
		return g.until - g.killB - g.grace + g.slack, true
	}
	return g.until - g.killB, true
}

// deadline acts at a stop or kill point that passed without a newer deadline.
func (g *guardProc) deadline() {
	now := g.clock.Now()
	if !g.stopSent && now < g.until-g.killB {
		g.stopSent = true
		g.signalTree(g.stopSig)
		g.signalTree(syscall.SIGCONT)
		g.logf("no renewal confirmed by leaderrun in time; sent %s to the child's processes", unix.SignalName(g.stopSig))
		return
	}
	g.stopSent = true
	g.killTree()
	g.logf("lease kill point reached without a renewal confirmed by leaderrun; killed the child's processes")
}

// handle applies one message. There is no "disarm" message: leaderrun ends
// a guard it no longer needs with SIGKILL (Guard.Disarm).
func (g *guardProc) handle(m guardMsg) {
	g.held = append(g.held, m.files...)
	if len(m.fields) == 0 {
		return
	}
	arg := func(i int) int64 {
		if i >= len(m.fields) {
			return 0
		}
		n, _ := strconv.ParseInt(m.fields[i], 10, 64)
		return n
	}
	switch m.fields[0] {
	case "timing": // stop-signal grace K slack
		g.stopSig, g.grace = syscall.Signal(arg(1)), time.Duration(arg(2))
		g.killB, g.slack = time.Duration(arg(3)), time.Duration(arg(4))
	case "cgroup":
		if len(m.fields) > 1 {
			g.cg = OpenCgroup(strings.Join(m.fields[1:], " "))
		}
	case "pgid":
		g.pgid = int(arg(1))
	case "until":
		// A passed point is never moved back: once the stop signal has gone
		// out, the kill follows at the E it was computed from.
		if e := time.Duration(arg(1)); !g.stopSent && e > g.until {
			g.until = e
		}
	case "check":
		if g.checks == nil {
			g.checks = make(map[int]bool)
		}
		if pg := int(arg(1)); pg > 0 {
			g.checks[pg] = true
		}
	case "checked":
		delete(g.checks, int(arg(1)))
	case "stopping":
		g.stopSent = true
	case "gone":
		// The tree is confirmed gone; its group ID may be reused from now on.
		g.pgid = 0
		g.until = 0
	}
}

// ownerGone runs when leaderrun's end of the socket closed before leaderrun
// killed the guard (Guard.Disarm): leaderrun died. Kill the tree at once,
// wait until it is gone, then let the held lock go.
func (g *guardProc) ownerGone() int {
	if g.pgid == 0 && g.cg == nil && len(g.checks) == 0 {
		g.release()
		return 0
	}
	g.killTree()
	gone := g.waitGone(guardKillWait)
	if gone {
		g.logf("leaderrun ended without releasing; killed the child's processes")
	} else {
		g.logf("leaderrun ended without releasing; the child's processes are not confirmed gone after SIGKILL and %v", guardKillWait)
	}
	g.release()
	if !gone {
		return 1
	}
	return 0
}

// tree is the child's process tree the guard enforces.
func (g *guardProc) tree() tree { return tree{pgid: g.pgid, cg: g.cg} }

// signalTree sends a catchable signal once to each process of the tree.
func (g *guardProc) signalTree(sig syscall.Signal) { _ = g.tree().signal(sig) }

// killTree SIGKILLs the whole tree, and the health checks' groups with it:
// a check runs under the lease as the child does.
func (g *guardProc) killTree() {
	g.killed = true
	_ = g.tree().kill()
	for pg := range g.checks {
		_ = signalGroup(pg, syscall.SIGKILL)
	}
}

// alive reports whether anything of the tree or of a health check may still
// run.
func (g *guardProc) alive() bool {
	if g.tree().alive() {
		return true
	}
	for pg := range g.checks {
		if groupAlive(pg) {
			return true
		}
	}
	return false
}

// waitGone polls until the tree is gone or d has passed, killing it again
// each round: a process may have been forked meanwhile.
func (g *guardProc) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	poll := 500 * time.Microsecond
	for {
		if !g.alive() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
		poll = min(2*poll, 10*time.Millisecond)
		g.killTree()
	}
}

// release closes the held lock descriptors and removes an empty cgroup.
func (g *guardProc) release() {
	for _, f := range g.held {
		f.Close()
	}
	g.held = nil
	if g.cg != nil {
		_ = g.cg.Remove()
	}
}

func (g *guardProc) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "leaderrun guard: "+format+"\n", args...)
}

// read turns socket messages (text fields, maybe with descriptors) into
// guardMsgs until the connection ends or quit closes.
//
// When leaderrun's end closes with a message of ours still unread in it
// (its death before it read "ready"), the kernel reports ECONNRESET to the
// next read here, ahead of the messages leaderrun sent before it died,
// which stay queued: the child's group among them. So a reset is read past,
// once: what follows is those messages, then the end (a zero read).
func (g *guardProc) read(msgs chan<- guardMsg, quit <-chan struct{}) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*8))
	reset := false
	for {
		n, oobn, err := g.conn.ReadMsg(buf, oob)
		if errors.Is(err, unix.ECONNRESET) && !reset {
			reset = true
			continue
		}
		m := guardMsg{}
		if err == nil && n == 0 && oobn == 0 {
			err = errors.New("EOF") // SOCK_SEQPACKET: a zero read is the peer's close
		}
		if err != nil {
			m.err = err
		} else {
			m.fields = strings.Fields(string(buf[:n]))
			m.files = parseRights(oob[:oobn])
		}
		select {
		case msgs <- m:
		case <-quit:
			return
		}
		if m.err != nil {
			return
		}
	}
}

func parseRights(oob []byte) []*os.File {
	if len(oob) == 0 {
		return nil
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, cm := range cmsgs {
		fds, err := unix.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "held"))
		}
	}
	return files
}
