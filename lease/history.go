package lease

import (
	"context"
	"time"
)

// Outcome says how a run ended, in its Run record.
type Outcome string

// The outcomes of a run. A record without an outcome (and without End) is
// an acquisition whose end was never written: the run is still going, or
// leaderrun was killed (SIGKILL, a power cut) before it could write it.
const (
	// OutcomeOK: the child exited with code 0.
	OutcomeOK Outcome = "ok"
	// OutcomeFailed: the child exited with a non-zero code, or was killed
	// by a signal leaderrun did not forward (Run.Signal says which).
	OutcomeFailed Outcome = "failed"
	// OutcomeLost: leadership was lost while the child ran (exit 124).
	OutcomeLost Outcome = "lost"
	// OutcomeSteppedDown: the health check failed and the leader stepped
	// down (exit 123).
	OutcomeSteppedDown Outcome = "stepped-down"
	// OutcomeStopped: leaderrun was asked to stop (INT or TERM) while the
	// child ran, and passed the signal on to it.
	OutcomeStopped Outcome = "stopped"
	// OutcomeNotStarted: the lease was acquired but the child never started.
	OutcomeNotStarted Outcome = "not-started"
)

// Run is one acquisition's record in a lease's run history. The store
// keeps it by Token, so the record written when the child starts (End
// zero) is replaced by the one written when the run ends. It holds nothing
// secret: no arguments, no environment.
type Run struct {
	// Name is the lease name.
	Name string `json:"name"`
	// Label is the holder label of the run (see Holder.Label).
	Label string `json:"holder"`
	// Token is the fencing token of the acquisition: it identifies the run.
	Token uint64 `json:"token"`
	// Start is when the lease was acquired (the holder's Since).
	Start time.Time `json:"start"`
	// End is when the run ended; zero while no end was written.
	End time.Time `json:"end,omitzero"`
	// Outcome is how the run ended; empty while no end was written.
	Outcome Outcome `json:"outcome,omitempty"`
	// ExitCode is leaderrun's exit code for the run (the child's own code,
	// 128+N for signal N, 123, 124); meaningless while End is zero.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that killed the child (SIGTERM), if any.
	Signal string `json:"signal,omitempty"`
	// Version is the version of the leaderrun that ran it.
	Version string `json:"version,omitempty"`
}

// Ended reports whether the run's end was written.
func (r Run) Ended() bool { return !r.End.IsZero() }

// DefaultHistoryKeep is how many runs per lease name a store keeps when
// the caller does not say.
const DefaultHistoryKeep = 100

// MaxHistoryKeep bounds how many runs per lease name a store keeps: the
// history is read whole by every reader (a few hundred bytes a run).
const MaxHistoryKeep = 10_000

// History is the optional capability of a Store that keeps a capped run
// history per lease name, readable from any host that reaches the store.
// Writes are best effort: a caller never lets one delay a release or
// change an exit code.
type History interface {
	// RecordRun writes r, replacing any record with the same Name and
	// Token, and then drops the runs of r.Name beyond the keep newest (by
	// token); keep <= 0 means DefaultHistoryKeep, and keep is capped at
	// MaxHistoryKeep. A store whose server has a clock may record its
	// reading at the write as the end, in place of r.End, when r has one.
	// A run's end record costs one store round trip.
	RecordRun(ctx context.Context, r Run, keep int) error
	// Runs returns up to limit runs of name, newest (highest token) first;
	// limit <= 0 means all the store keeps. A name without history gives
	// an empty slice and no error.
	Runs(ctx context.Context, name string, limit int) ([]Run, error)
}

// HistoryKeep returns the number of runs to keep for a RecordRun keep
// argument.
func HistoryKeep(keep int) int {
	switch {
	case keep <= 0:
		return DefaultHistoryKeep
	case keep > MaxHistoryKeep:
		return MaxHistoryKeep
	}
	return keep
}
