package run

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
)

// What a run writes to the store's run history (the history and check
// commands read it).

// runRecord writes the run history of one acquisition, best effort: the
// start while the child starts, the end once the lease is released. A
// failed write is a warning, one per run (with or without -v); it never
// changes the run's exit code.
type runRecord struct {
	h       lease.History // nil: --history-keep 0
	run     lease.Run
	keep    int
	timeout time.Duration
	log     *slog.Logger
	started chan struct{} // closed when the start write is done; nil if none began
	warned  bool          // a failed write was warned about (the end write follows the start's)
	ended   *lease.Run    // the end written already (--once-per, before the release; endedWith, with it)
	// exitedAt is when the child exited (exited): the run's end, rather
	// than when the end is written, after the sweep and the release.
	exitedAt time.Time
}

// exited records that the child exited now (runner.Config.Exited).
func (r *runRecord) exited() { r.exitedAt = wallclock.Now() }

// newRunRecord prepares the record of the acquisition info, made by
// leaderrun version.
func newRunRecord(store lease.Store, keep int, info lease.Holder, version string, timeout time.Duration, log *slog.Logger) *runRecord {
	var h lease.History = store
	if keep == 0 {
		h = nil
	}
	start := info.Since
	if start.IsZero() {
		start = wallclock.Now()
	}
	return &runRecord{h: h, keep: keep, timeout: timeout, log: log,
		run: lease.Run{Name: info.Name, Label: runLabel(info), Token: info.Token, Start: start.UTC(), Version: version, Granted: info.Granted.UTC()}}
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

// endWhileHeld is end for --once-per, before the release: the next holder
// decides from this record, and a run it finds without its end it does not
// count, so it would run COMMAND again in the same period (seen under load:
// a Kubernetes end write outlasted its call timeout, and a 4 s period had
// two runs). So a write the store did not answer in time, or answered as
// unavailable, is tried again, after a pause (lease.FirstRetry, doubling up
// to a second), for as long as left: until the lease's certain validity
// ends, when no other holder can have taken it yet. An end not written is
// not taken as written: the release carries it where the store can
// (lease.EndingRelease), or end writes it once more after the release.
func (r *runRecord) endWhileHeld(left time.Duration, o lease.Outcome, code int, sig syscall.Signal) {
	if r.h == nil || r.started == nil {
		r.end(o, code, sig)
		return
	}
	<-r.started
	run := r.endOf(o, code, sig)
	until := time.Now().Add(left)
	pause := lease.FirstRetry
	for {
		err := r.tryWrite(run)
		if err == nil {
			r.ended = &run
			return
		}
		if !errors.Is(err, lease.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) || time.Until(until) < pause {
			r.warn(run, err)
			return
		}
		r.log.Debug("writing the run's end failed; trying again while the lease is certainly ours", "lease", run.Name, "err", err, "retry_in", pause)
		time.Sleep(pause) // a pause between tries, not a synchronisation
		pause = min(2*pause, time.Second)
	}
}

// endOf is the run's end record, ending when the child exited, or now
// when it never started.
func (r *runRecord) endOf(o lease.Outcome, code int, sig syscall.Signal) lease.Run {
	run := r.run
	end := r.exitedAt
	if end.IsZero() {
		end = wallclock.Now()
	}
	run.End, run.Outcome, run.ExitCode = end.UTC(), o, code
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
	if err := r.tryWrite(run); err != nil {
		r.warn(run, err)
	}
}

// tryWrite writes run, within the call timeout.
func (r *runRecord) tryWrite(run lease.Run) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	return r.h.RecordRun(ctx, run, r.keep)
}

// warn says that run was not written, because of err: once per run,
// whatever the cause. A store that refuses it (a role without a grant on
// the runs table, a Redis ACL without the sorted set commands, a read-only
// SAS) refuses it every run, and silence would let the history stop
// unnoticed; an outage passes. Either way the run is missing from the
// history, which is what a reader of check's answer needs to know.
func (r *runRecord) warn(run lease.Run, err error) {
	level := slog.LevelWarn
	if r.warned {
		level = slog.LevelDebug
	}
	r.warned = true
	r.log.Log(context.Background(), level, "run history of lease "+run.Name+" not written ("+historyMissing+"): "+err.Error(), "event", "history_not_written")
}

// historyMissing is what a failed history write means for the run.
const historyMissing = "leaderrun check may report MISSED for this run"

// notStarted records a run whose lease was taken but whose child never
// started, and returns o.
func notStarted(rec *runRecord, o *Outcome) *Outcome {
	rec.end(lease.OutcomeNotStarted, o.Code, 0)
	return o
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
