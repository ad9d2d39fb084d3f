package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// Containment modes of --contain.
const (
	ContainAuto   = "auto"   // a cgroup when one can be made, else the process group
	ContainCgroup = "cgroup" // a cgroup, or refuse to run
	ContainGroup  = "group"  // the process group only
)

// checkContain refuses --contain cgroup before any lease is taken when no
// cgroup can be made here, so a misconfigured job fails without touching the
// store.
func checkContain(mode string) error {
	if mode != ContainCgroup {
		return nil
	}
	cg, err := runner.NewCgroup()
	if err != nil {
		return fmt.Errorf("%w: --contain cgroup: %w", lease.ErrConfig, err)
	}
	return cg.Remove()
}

// lockFiler is a lease whose hold is a local lock descriptor (the file
// store): the guard keeps a duplicate of it until the child's tree is gone.
// A slot's lease passes on its store lease's (lease.As).
type lockFiler interface{ LockFile() *os.File }

// protection is what enforces a run's safety outside leaderrun itself: the
// guard process and, where one could be made, the child's own cgroup
// (docs/design.md, safety rules 14-15).
type protection struct {
	guard *runner.Guard
	cg    *runner.Cgroup
	// handshake receives the outcome of a handshake checked in the
	// background (verifyAsync); nil when it completed before the child.
	handshake  chan error
	verifyWait time.Duration
	stopVerify context.CancelFunc
	verifying  sync.WaitGroup
}

// verifyAsync waits for the guard's handshake in the background, bounded
// by wait (guardHandshakeWait); watch acts on its outcome, finish ends the
// wait.
func (p *protection) verifyAsync(wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	p.handshake, p.verifyWait, p.stopVerify = make(chan error, 1), wait, cancel
	p.verifying.Add(1)
	go func() { // owned by p: finish waits for it
		defer p.verifying.Done()
		p.handshake <- p.guard.Ready(ctx)
	}()
}

// guardStart is a guard started in the background before the lease is
// taken, so that its fork and exec overlap opening the store and the first
// acquire attempt instead of delaying the child. A standby keeps it while it
// waits (its memory: docs/performance.md), so that a handover does not
// wait for a process start either; without the lease it is dropped.
type guardStart struct {
	program string // the program the guard runs from
	trusted bool   // known to be of this build (Config.GuardTrusted)
	done    chan struct{}
	once    sync.Once
	g       *runner.Guard
	err     error
}

// forked, when not nil, runs once the guard process has been forked (or
// could not be).
func startGuardAsync(program string, trusted bool, forked func()) *guardStart {
	s := &guardStart{program: program, trusted: trusted, done: make(chan struct{})}
	go func() { // owned by s: take and drop wait for it
		defer close(s.done)
		s.g, s.err = startGuard(program, trusted)
		if forked != nil {
			forked()
		}
	}()
	return s
}

// startGuard starts the guard from program, trusted to be of this build
// when it is this program's image or the dispatching leaderrun's.
func startGuard(program string, trusted bool) (*runner.Guard, error) {
	if trusted {
		return runner.StartTrustedGuardProgram(program)
	}
	return runner.StartGuardProgram(program)
}

// forked waits until the guard process has been forked (or could not be)
// and startGuardAsync's forked has run.
func (s *guardStart) forked() { <-s.done }

// take hands the early guard over, or starts a fresh one if the early one
// could not be started.
func (s *guardStart) take() (*runner.Guard, error) {
	<-s.done
	var (
		g   *runner.Guard
		err error
	)
	s.once.Do(func() { g, err = s.g, s.err })
	if g == nil || err != nil {
		return startGuard(s.program, s.trusted)
	}
	return g, nil
}

// drop disarms the early guard unless it was taken. Idempotent.
func (s *guardStart) drop() {
	<-s.done
	s.once.Do(func() {
		if s.g != nil {
			s.g.Disarm()
		}
	})
}

// protect starts the guard for lease l (taking the early one from pre) and
// makes the child's cgroup as --contain asks. On error nothing is left
// running.
func protect(l lease.Lease, pre *guardStart, mode string, stop syscall.Signal, t lease.Timing, log *slog.Logger) (*protection, error) {
	cg, err := childCgroup(mode, log)
	if err != nil {
		return nil, err
	}
	p := &protection{cg: cg}
	if p.guard, err = pre.take(); err != nil {
		p.removeCgroup(log)
		return nil, err
	}
	if err := p.confirmGuard(pre.program); err != nil {
		p.finish(true, log)
		return nil, err
	}
	if err := p.armGuard(l, stop, t); err != nil {
		p.finish(true, log)
		return nil, err
	}
	log.Debug("guard started", "guard_pid", p.guard.PID())
	return p, nil
}

// childCgroup makes the child's own cgroup as --contain mode asks. It
// returns nil when the process group alone contains the child: asked so,
// or (--contain auto) no cgroup can be made here.
func childCgroup(mode string, log *slog.Logger) (*runner.Cgroup, error) {
	if mode == ContainGroup {
		log.Debug("containment: process group only (--contain group)")
		return nil, nil
	}
	cg, err := runner.NewCgroup()
	switch {
	case err == nil:
		log.Debug("containment: the child runs in its own cgroup", "cgroup", cg.Path())
		return cg, nil
	case mode == ContainCgroup:
		return nil, fmt.Errorf("%w: --contain cgroup: %w", lease.ErrConfig, err)
	}
	log.Debug("containment: process group only (no cgroup: a descendant that calls setsid escapes)", "reason", err)
	return nil, nil
}

// confirmGuard waits for the guard's handshake where the child must not
// start before it, and otherwise has it checked in the background. The
// guard is still to be finished when it fails.
func (p *protection) confirmGuard(program string) error {
	g := p.guard
	if g.SameBuild() && g.IgnoresHangup() {
		// The guard is this very program, ignoring SIGHUP from its start:
		// the child need not wait for its handshake (runner.Guard.SameBuild
		// says why a guard still starting up acts all the same). It is
		// checked in the background; watch stops the child should it fail.
		p.verifyAsync(guardHandshakeWait)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), guardHandshakeWait)
	err := g.Ready(ctx)
	cancel()
	switch {
	case err == nil:
		return nil
	case g.SameBuild():
		// Started while SIGHUP was caught (a guard started again to wait
		// again, long before a child): no child before it ignores SIGHUP.
		return guardCause{pid: g.PID(), handshake: !errors.Is(err, runner.ErrGuardDied), within: guardHandshakeWait}
	}
	// A guard from another program may be of another build: no child
	// before it has answered.
	return fmt.Errorf("%w: the guard program %s %v within %v: it is not a leaderrun of this build (mixed installation?); install leaderrun and its store programs from one build", lease.ErrConfig, program, guardFailure(err), guardHandshakeWait)
}

// armGuard tells the guard what it enforces: the stop signal with its
// bounds, the child's cgroup and, for the file store, the lock to keep.
func (p *protection) armGuard(l lease.Lease, stop syscall.Signal, t lease.Timing) error {
	if err := p.guard.Timing(stop, t.Grace, t.KillBound); err != nil {
		return err
	}
	if p.cg != nil {
		if err := p.guard.Cgroup(p.cg); err != nil {
			return err
		}
	}
	if lf, ok := lease.As[lockFiler](l); ok {
		if f := lf.LockFile(); f != nil {
			return p.guard.Hold(f)
		}
	}
	return nil
}

// guardHandshakeWait bounds how long the guard may take to say it is
// ready: the child's start waits for it when the guard runs from another
// program; otherwise a run whose guard has not answered by then is stopped
// as if the guard had died.
const guardHandshakeWait = 10 * time.Second

// guardFailure says how a guard failed its handshake.
func guardFailure(err error) string {
	if errors.Is(err, runner.ErrGuardDied) {
		return "ended without completing its handshake"
	}
	return "did not complete its handshake"
}

// guardCause is the cause of the run's end when the guard died or was
// stopped.
type guardCause struct {
	pid       int
	stopped   bool
	handshake bool          // alive, but did not complete its handshake ...
	within    time.Duration // ... within this
}

func (g guardCause) Error() string {
	how := "died"
	switch {
	case g.stopped:
		how = "was stopped (SIGSTOP)"
	case g.handshake:
		how = fmt.Sprintf("did not complete its handshake within %v", g.within)
	}
	return fmt.Sprintf("the guard process (pid %d) %s, so leaderrun could no longer enforce the lease should it die itself", g.pid, how)
}

func (g guardCause) Unwrap() error { return runner.ErrGuardDied }

// watch returns a context derived from ctx that is also cancelled when the
// guard dies, and a function that stops watching (and waits for it).
func (p *protection) watch(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs := p.handshake // nil: verified before the child started
		for {
			select {
			case <-p.guard.Died():
				cancel(guardCause{pid: p.guard.PID(), stopped: p.guard.Stopped()})
				return
			case err := <-hs:
				if err != nil {
					// Died closed too if the guard ended: say so rather
					// than "no handshake".
					select {
					case <-p.guard.Died():
						cancel(guardCause{pid: p.guard.PID(), stopped: p.guard.Stopped()})
					default:
						cancel(guardCause{pid: p.guard.PID(), handshake: true, within: p.verifyWait})
					}
					return
				}
				hs = nil
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() { cancel(nil); <-done }
}

// finish ends the protection. treeGone says the child's tree is confirmed
// gone (or never existed): only then is the guard disarmed and the cgroup
// removed; otherwise the guard is left to kill and wait for the tree when
// leaderrun exits, holding the file lock until then.
func (p *protection) finish(treeGone bool, log *slog.Logger) {
	p.dismiss(treeGone, log)
	if treeGone {
		p.guard.Disarm()
	}
}

// dismiss is finish without waiting for the guard to be gone: a run's
// last steps then overlap the guard's exit, and finish reaps it.
func (p *protection) dismiss(treeGone bool, log *slog.Logger) {
	if p.stopVerify != nil {
		p.stopVerify()
		p.verifying.Wait()
	}
	if !treeGone {
		return
	}
	// The cgroup first: should leaderrun die in between, the guard still
	// knows it (and finds it gone), rather than nobody removing it.
	p.removeCgroup(log)
	p.guard.Dismiss()
}

func (p *protection) removeCgroup(log *slog.Logger) {
	if p.cg == nil {
		return
	}
	if err := p.cg.Remove(); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Debug("removing the child's cgroup", "cgroup", p.cg.Path(), "err", err)
	}
	p.cg = nil
}
