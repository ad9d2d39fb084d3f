package cmd

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
)

// What the run path writes to the run history (the history and check
// commands read it), and how it learns that a signal stopped the run.

// runRecord writes the run history of one acquisition, best effort: the
// start while the child starts, the end once the lease is released. A
// failed write is a warning, one per run (with or without -v); it never
// changes the run's exit code.
type runRecord struct {
	h       lease.History // nil: the store keeps no history, or --history-keep 0
	run     lease.Run
	keep    int
	timeout time.Duration
	log     *slog.Logger
	started chan struct{} // closed when the start write is done; nil if none began
	warned  bool          // a failed write was warned about (the end write follows the start's)
	ended   *lease.Run    // the end written already (--once-per, before the release; endedWith, with it)
}

// newRunRecord prepares the record of the acquisition info.
func newRunRecord(store lease.Store, keep int, info lease.Holder, timeout time.Duration, log *slog.Logger) *runRecord {
	h, _ := store.(lease.History)
	if keep == 0 {
		h = nil
	}
	start := info.Since
	if start.IsZero() {
		start = wallclock.Now()
	}
	return &runRecord{h: h, keep: keep, timeout: timeout, log: log,
		run: lease.Run{Name: info.Name, Label: runLabel(info), Token: info.Token, Start: start.UTC(), Version: version()}}
}

// start writes the start record (no end: what a SIGKILLed leaderrun leaves)
// in the background, so the child does not wait for it; end waits for it.
func (r *runRecord) start() {
	if r.h == nil {
		return
	}
	r.started = make(chan struct{})
	go func() {
		defer close(r.started)
		r.write(r.run)
	}()
}

// end writes the run's end, replacing its start record: one store round
// trip, after the release, unless the release carried this same end
// (endedWith). It waits for the start write in any case.
func (r *runRecord) end(o lease.Outcome, code int, sig syscall.Signal) {
	if r.h == nil {
		return
	}
	if r.started != nil {
		<-r.started
	} else if r.ended == nil {
		// The child never started, so neither did its record: write the
		// start first. A store trims the history only at a start record
		// (lease.History), so a job whose child never starts (an exec
		// format error every night) would add a record a run for good.
		r.write(r.run)
	}
	run := r.endOf(o, code, sig)
	if e := r.ended; e != nil && e.Outcome == run.Outcome && e.ExitCode == run.ExitCode && e.Signal == run.Signal {
		return // the same end again
	}
	r.ended = &run
	r.write(run)
}

// endOf is the run's end record, ending now.
func (r *runRecord) endOf(o lease.Outcome, code int, sig syscall.Signal) lease.Run {
	run := r.run
	run.End, run.Outcome, run.ExitCode = wallclock.Now().UTC(), o, code
	if sig != 0 {
		run.Signal = unix.SignalName(sig)
	}
	return run
}

// endForRelease is the run's end record for a release that carries it
// (lease.EndingRelease), which need not wait for the start write: a start
// that lands after never replaces the end there. ok is false when there is
// none to carry: no history, an end written already (--once-per), or a
// child that never started (end writes its start first). endedWith says it
// was written; end still waits for the start write.
func (r *runRecord) endForRelease(o lease.Outcome, code int, sig syscall.Signal) (run lease.Run, ok bool) {
	if r.h == nil || r.ended != nil || r.started == nil {
		return lease.Run{}, false
	}
	return r.endOf(o, code, sig), true
}

// endedWith records that run, an end record, was written (by the release).
func (r *runRecord) endedWith(run lease.Run) { r.ended = &run }

func (r *runRecord) write(run lease.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if err := r.h.RecordRun(ctx, run, r.keep); err != nil {
		// Once per run, whatever the cause: a store that refuses it (a role
		// without a grant on the runs table, a Redis ACL without the sorted
		// set commands, a read-only SAS) refuses it every run, and silence
		// would let the history stop unnoticed; an outage passes. Either
		// way the run is missing from the history, which is what a reader
		// of check's answer needs to know.
		level := slog.LevelWarn
		if r.warned {
			level = slog.LevelDebug
		}
		r.warned = true
		r.log.Log(ctx, level, "run history of lease "+run.Name+" not written ("+historyMissing+"): "+err.Error(), "event", "history_not_written")
	}
}

// historyMissing is what a failed history write means for the run.
const historyMissing = "leaderrun check may report MISSED for this run"

// notStarted records a run whose lease was taken but whose child never
// started, and returns o.
func notStarted(rec *runRecord, o *outcome) *outcome {
	rec.end(lease.OutcomeNotStarted, o.code, 0)
	return o
}

// signalTap passes the signals leaderrun catches on to the runner and
// remembers whether one asked leaderrun to stop (INT or TERM; HUP often
// means "reload"): the run then ends "stopped" rather than "failed" or "ok".
type signalTap struct {
	out     chan os.Signal
	quit    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
}

func tapSignals(in <-chan os.Signal) *signalTap {
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

// childRunOutcome is the history outcome of a child that ended by itself
// (or by a forwarded signal).
func childRunOutcome(res resultView, stopped bool) lease.Outcome {
	switch {
	case stopped:
		return lease.OutcomeStopped
	case res.code == 0 && res.signal == 0:
		return lease.OutcomeOK
	default:
		return lease.OutcomeFailed
	}
}

// resultView is what the history needs of a runner.Result.
type resultView struct {
	code   int
	signal syscall.Signal
}
