package cmd

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/leaderrun/leaderrun/internal/run"
)

// Exit codes of the read-only commands (docs/design.md, exit codes); a
// run's are the run's (run.ExitLost, …), and an error's run.Classify's.
const (
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

// fromRun is a run's outcome.
func fromRun(o *run.Outcome) *outcome { return newOutcome(o.Code, o.Level, o.Msg, o.Attrs...) }

// usageError is a mistake on the command line (of kind run.ErrUsage).
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == run.ErrUsage }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// classify maps any error to its outcome: an outcome carried as an error
// is itself; any other error is mapped as a run's errors are, by kind
// (run.Classify, the one mapping of errors to exit codes).
func classify(err error) *outcome {
	var o *outcome
	if errors.As(err, &o) {
		return o
	}
	return fromRun(run.Classify(err))
}
