package run

// The signals leaderrun catches for a run: until the child starts INT,
// TERM, HUP and QUIT cancel the wait (signalWatch); once it runs they are
// forwarded, and INT or TERM mark the run stopped (signalTap).

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// sigpipe is registered for SIGPIPE by keepStderrFromKilling and never
// read: being registered is what matters (see there).
var (
	sigpipe     chan os.Signal
	sigpipeOnce sync.Once
)

// keepStderrFromKilling makes a write to a closed stderr (a log reader that
// went away: `leaderrun … 2>&1 | head -1`) fail with EPIPE instead of
// killing leaderrun: Go kills a program on EPIPE on fd 1 or 2 unless it
// handles SIGPIPE. A leaderrun killed that way would skip the sweep of the
// child's leftovers and leave the lease to expire while they still run.
//
// It catches SIGPIPE rather than ignoring it: an ignored disposition would
// be inherited by the child across exec, a caught one is reset to the
// default there, so the child still dies of SIGPIPE as it would without
// leaderrun. (The Go runtime installs its own SIGPIPE handler at start even
// when the process was started with SIGPIPE ignored, so the child gets the
// default in every case, as it did before.) The registration stays for the
// life of the process: the final line is written after the run returns.
func keepStderrFromKilling() {
	sigpipeOnce.Do(func() {
		sigpipe = make(chan os.Signal, 1)
		signal.Notify(sigpipe, syscall.SIGPIPE)
	})
}

// signalCause is the cause of the run context when leaderrun gets a signal
// while it waits for the lease.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return "got " + unix.SignalName(s.sig) }

// signalWatch turns INT, TERM, HUP and QUIT into the cancellation of ctx while
// leaderrun waits for the lease and prepares the child; other signals are
// dropped, as there is no child yet to forward them to.
type signalWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	quit   chan struct{}
	done   chan struct{}
}

func watchSignals(parent context.Context, sigs <-chan os.Signal) *signalWatch {
	w := &signalWatch{quit: make(chan struct{}), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.quit:
				return
			case s := <-sigs:
				// QUIT too: Ctrl-\ must not be ignored while nothing runs yet.
				if sig := s.(syscall.Signal); sig == syscall.SIGINT || sig == syscall.SIGTERM || sig == syscall.SIGHUP || sig == syscall.SIGQUIT {
					w.cancel(signalCause{sig})
					return
				}
			}
		}
	}()
	return w
}

// stop ends the watching goroutine without cancelling ctx; signals that
// arrive afterwards stay in the channel for the runner to forward.
func (w *signalWatch) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

// signalled reports whether a signal cancelled ctx.
func (w *signalWatch) signalled() bool {
	var sc signalCause
	return errors.As(context.Cause(w.ctx), &sc)
}

// signalTap passes the signals leaderrun catches on to the runner and
// remembers whether one asked leaderrun to stop (INT or TERM; HUP often
// means "reload"): the run then ends "stopped" rather than "failed" or "ok".
// Before it passes INT or TERM on, it calls onStop (--listen: /leader turns
// 503 before the child is told to stop).
type signalTap struct {
	out     chan os.Signal
	quit    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
}

func tapSignals(in <-chan os.Signal, onStop func()) *signalTap {
	t := &signalTap{out: make(chan os.Signal, cap(in)), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for {
			select {
			case <-t.quit:
				return
			case s := <-in:
				switch s {
				case syscall.SIGINT, syscall.SIGTERM:
					t.stopped.Store(true)
					onStop()
				}
				select {
				case t.out <- s:
				default: // the runner is gone or far behind, as with a full channel before
				}
			}
		}
	}()
	return t
}

// close ends the tap's goroutine and waits for it.
func (t *signalTap) close() {
	close(t.quit)
	<-t.done
}
