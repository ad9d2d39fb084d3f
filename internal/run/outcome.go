package run

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// Exit codes of a run besides the child's own, which pass through
// unchanged (docs/design.md, exit codes; the README's table).
const (
	// ExitConflict is the default code when the lease is held and the wait ran out.
	ExitConflict = 75
	// ExitUnhealthy means the health check failed its retries in a row
	// while leading: the child was stopped and the lease released.
	ExitUnhealthy = 123
	// ExitLost means leadership was lost while the child ran and the run stopped it.
	ExitLost = 124
	// ExitFailure means leaderrun itself failed: usage, configuration, store.
	ExitFailure = 125
	// ExitNotExecutable means COMMAND exists but cannot be executed.
	ExitNotExecutable = 126
	// ExitNotFound means COMMAND was not found.
	ExitNotFound = 127
)

// Outcome is how a run ends: its exit code and the last stderr line that
// says which case happened (codes can collide with the child's own).
type Outcome struct {
	Code  int
	Level slog.Level
	Msg   string
	Attrs []any // log attributes of the final line ("event", …)
}

func newOutcome(code int, level slog.Level, msg string, attrs ...any) *Outcome {
	return &Outcome{Code: code, Level: level, Msg: msg, Attrs: attrs}
}

// ErrUsage is the kind of an error that is a mistake on the command line:
// Classify says so in the final line.
var ErrUsage error = &lease.Error{Msg: "usage"}

// usagef is a mistake on the command line, said as format says.
func usagef(format string, args ...any) error {
	return lease.NewError(fmt.Sprintf(format, args...), ErrUsage)
}

// Classify maps an error to its outcome: the code and event come from
// errors.Is/As, never from the text; the message is err.Error() as it is,
// since every error of leaderrun is written for people (see lease's
// sentinel errors). It is the one mapping of errors to exit codes, for
// the run (whose history records the code) and for cmd.
func Classify(err error) *Outcome {
	switch {
	case errors.Is(err, ErrUsage):
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
