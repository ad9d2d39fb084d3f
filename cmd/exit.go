package cmd

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

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

func done(code int, level slog.Level, msg string, attrs ...any) *outcome {
	return &outcome{code: code, level: level, msg: msg, attrs: attrs}
}

// usageError is a mistake on the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// classify maps any error to its outcome, with errors.Is/As only.
func classify(err error) *outcome {
	var o *outcome
	if errors.As(err, &o) {
		return o
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return done(ExitFailure, slog.LevelError, "usage: "+readable(err)+" (see leaderrun --help)", "event", "usage")
	case errors.Is(err, runner.ErrNotFound):
		return done(ExitNotFound, slog.LevelError, readable(err), "event", "not_found")
	case errors.Is(err, runner.ErrNotExecutable):
		return done(ExitNotExecutable, slog.LevelError, readable(err), "event", "not_executable")
	case errors.Is(err, lease.ErrUnsafeTiming), errors.Is(err, lease.ErrConfig), errors.Is(err, lease.ErrBadName):
		return done(ExitFailure, slog.LevelError, readable(err), "event", "config")
	case errors.Is(err, lease.ErrUnavailable):
		return done(ExitFailure, slog.LevelError, readable(err), "event", "store_unavailable")
	default:
		return done(ExitFailure, slog.LevelError, readable(err), "event", "error")
	}
}

// leadSentinels are the sentinel errors whose meaning leads a message, most
// specific first.
var leadSentinels = []error{
	runner.ErrNotFound, runner.ErrNotExecutable,
	lease.ErrUnsafeTiming, lease.ErrBadName, lease.ErrConfig, lease.ErrUnavailable,
	lease.ErrLost, lease.ErrNotHeld, lease.ErrHeld,
}

// pkgPrefix matches the package prefix of a segment of an error chain
// ("redislease: acquire x: lease: store unavailable: …").
var pkgPrefix = regexp.MustCompile(`(^|: )(lease|redislease|bloblease|filelease|etcdlease|pglease): `)

// readable words err for users without the internal chain of package
// prefixes: the meaning of its first sentinel (found with errors.Is) leads,
// without its package, and the sentinel's text is taken out of the middle
// of the chain. "redislease: acquire x: lease: store unavailable: dial tcp
// …" reads "store unavailable: acquire x: dial tcp …". Classification never
// depends on this text.
func readable(err error) string {
	lead, sep, rest := readableParts(err)
	switch {
	case lead == "":
		return rest
	case rest == "":
		return lead
	default:
		return lead + sep + rest
	}
}

// readableParts splits readable's text into the lead (the first sentinel's
// meaning, or ""), the separator that goes after it, and the rest.
func readableParts(err error) (lead, sep, rest string) {
	s := err.Error()
	sep = ": "
	for _, sentinel := range leadSentinels {
		if !errors.Is(err, sentinel) {
			continue
		}
		t := sentinel.Error()
		if i := strings.Index(s, t); i >= 0 {
			after := s[i+len(t):]
			switch {
			case strings.HasPrefix(after, ": "):
				after = after[2:]
			case i == 0 && strings.HasPrefix(after, " "):
				sep, after = " ", after[1:] // `lease: bad name "x": …`
			}
			s = s[:i] + after
			lead = pkgPrefix.ReplaceAllString(t, "$1")
		}
		break
	}
	for {
		t := pkgPrefix.ReplaceAllString(s, "$1")
		if t == s {
			break
		}
		s = t
	}
	return lead, sep, strings.TrimSuffix(strings.TrimSpace(s), ":")
}
