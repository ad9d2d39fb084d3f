package cmd

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// Exit codes of leaderrun itself (docs/design.md, exit codes). The child's own codes pass
// through unchanged; see the README's exit-code table.
const (
	// ExitConflict is the default code when the lease is held and --wait ran out.
	ExitConflict = 75
	// ExitUnhealthy means the --health-cmd check failed --health-retries
	// times in a row while leading: leaderrun stopped the child and released
	// the lease.
	ExitUnhealthy = 123
	// ExitLost means leadership was lost while the child ran and leaderrun stopped it.
	ExitLost = 124
	// ExitFailure means leaderrun itself failed: usage, configuration, store.
	ExitFailure = 125
	// ExitNotExecutable means COMMAND exists but cannot be executed.
	ExitNotExecutable = 126
	// ExitNotFound means COMMAND was not found.
	ExitNotFound = 127
	// ExitStatusFree is `status`'s code for a free lease.
	ExitStatusFree = 3
	// ExitStatusUnknown is `status`'s code for a lease the store knows
	// nothing of: no holder, no standby, no recorded run (a name never used
	// with this store, or a mistyped one).
	ExitStatusUnknown = 4
)

// outcome is how a command ends: its exit code and the last stderr line that
// says which case happened (codes can collide with the child's own).
type outcome struct {
	code  int
	level slog.Level
	msg   string
	attrs []any
}

// Error makes an outcome usable as an error through urfave/cli.
func (o *outcome) Error() string { return o.msg }

func newOutcome(code int, level slog.Level, msg string, attrs ...any) *outcome {
	return &outcome{code: code, level: level, msg: msg, attrs: attrs}
}

// usageError is a mistake on the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// classify maps any error to its outcome: the code and event come from
// errors.Is/As, never from the text; the message is err.Error() as it is,
// since every error of leaderrun is written for people (see lease's
// sentinel errors).
func classify(err error) *outcome {
	var o *outcome
	if errors.As(err, &o) {
		return o
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return newOutcome(ExitFailure, slog.LevelError, "usage: "+err.Error()+" (see leaderrun --help)", "event", "usage")
	case errors.Is(err, runner.ErrNotFound):
		return newOutcome(ExitNotFound, slog.LevelError, err.Error(), "event", "not_found")
	case errors.Is(err, runner.ErrNotExecutable):
		return newOutcome(ExitNotExecutable, slog.LevelError, err.Error(), "event", "not_executable")
	case errors.Is(err, lease.ErrUnsafeTiming), errors.Is(err, lease.ErrConfig), errors.Is(err, lease.ErrBadName):
		return newOutcome(ExitFailure, slog.LevelError, err.Error(), "event", "config")
	case errors.Is(err, lease.ErrUnavailable):
		return newOutcome(ExitFailure, slog.LevelError, err.Error(), "event", "store_unavailable")
	default:
		return newOutcome(ExitFailure, slog.LevelError, err.Error(), "event", "error")
	}
}
