package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// 128+N for signal N, 123, 124); meaningless while End is zero, and
	// written as null then (see MarshalJSON).
	ExitCode int `json:"exit_code"`
	// Signal names the signal that killed the child (SIGTERM), if any.
	Signal string `json:"signal,omitempty"`
	// Version is the version of the leaderrun that ran it.
	Version string `json:"version,omitempty"`
	// Granted is when the store granted the run's lease, on the store's
	// clock (Holder.Granted): set on stores whose tokens count their clock
	// (ClockTokens), zero on the others and in records written before
	// leaderrun recorded it.
	Granted time.Time `json:"granted,omitzero"`
}

// Ended reports whether the run's end was written.
func (r Run) Ended() bool { return !r.End.IsZero() }

// MarshalJSON writes r with "exit_code":null while no end was written: a
// run without an end has no exit code, and a script that tests exit_code
// == 0 must not count it a success. (Reading null back gives 0.) A type that
// embeds Run gets this method too: give it its own.
func (r Run) MarshalJSON() ([]byte, error) {
	type plain Run // without this method
	v := struct {
		plain
		ExitCode *int `json:"exit_code"`
	}{plain: plain(r)}
	if r.Ended() {
		v.ExitCode = &r.ExitCode
	}
	return json.Marshal(v)
}

// DefaultHistoryKeep is how many runs per lease name a store keeps when
// the caller does not say.
const DefaultHistoryKeep = 100

// MaxHistoryKeep bounds how many runs per lease name a store keeps: the
// history is read whole by every reader (a few hundred bytes a run).
const MaxHistoryKeep = 10_000

// History is part of every Store: a capped run history per lease name,
// readable from any host that reaches the store.
// Writes are best effort: a caller never lets one delay a release or
// change an exit code.
type History interface {
	// RecordRun writes r, replacing any record with the same Name and
	// Token, and then drops the runs of r.Name beyond the keep newest (by
	// token) valid ones (CheckRun): an entry of the history that is not a
	// valid record (malformed, another name's, from the future) never counts
	// towards keep and is dropped, so it cannot push a real run out. keep <= 0
	// means DefaultHistoryKeep, and keep is capped at MaxHistoryKeep. keep
	// is this writer's: a store never reads a keep from the history itself
	// (another writer's, or a forger's). A store may trim only when it
	// writes a start record (r without End), and keep a few runs beyond
	// keep until then (the file store, Azure and etcd: about one run in
	// ten). A store whose server has a clock may record its reading at the
	// write as the end, in place of r.End, when r has one. A run's end
	// record costs one store round trip, or none of its own where the
	// lease can carry it (EndingRelease).
	RecordRun(ctx context.Context, r Run, keep int) error
	// Runs returns up to limit valid runs (CheckRun) of name, newest
	// (highest token) first; limit <= 0 means all the store keeps. A name
	// without history gives an empty slice and no error.
	Runs(ctx context.Context, name string, limit int) ([]Run, error)
}

// EndingRelease is the optional capability of a Lease (found with As) to
// give the lease up and write its run's end record in one atomic write to
// the store, so that the end costs the run no round trip after the
// release. ReleaseEnding is Release with run (an end record: run.Ended(),
// with this lease's Name, or for a slot's lease the lease name of the
// slot, and Token)
// written as RecordRun writes an end: both happen, or, when the lease is no
// longer ours (an error wrapping ErrNotHeld or ErrLost), neither. After any
// other error the caller cannot tell whether they happened; it writes the
// record again with RecordRun, which replaces it. The run's start record
// may still be on its way (RecordRun, from another goroutine) when
// ReleaseEnding is called: a start that lands after the end never replaces
// it.
type EndingRelease interface {
	ReleaseEnding(ctx context.Context, run Run) error
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

// MaxClockSkew is how far the clocks that write a run's times (leaderrun's
// on the hosts, or the store server's) may run ahead of the clock of the
// host that reads them: a record whose start or end is later than the
// reader's now plus MaxClockSkew, or whose token on a store that mints
// tokens from its clock (Run.Token in microseconds) is, cannot have been
// written yet and is not a run (a forged or hand-edited record, or a clock
// set years ahead). An end may be up to MaxClockSkew before its start (two
// clocks). Five minutes: far more than NTP leaves between hosts, as in
// Kerberos.
const MaxClockSkew = 5 * time.Minute

// maxRunText bounds each text field of a record (holder label, outcome,
// signal, version): leaderrun writes far less.
const maxRunText = 1024

// maxRunToken bounds tokens: every store mints them below 2^53, so that JSON
// readers hold them exactly.
const maxRunToken = 1<<53 - 1

// ErrBadRun is what CheckRun's errors wrap: the entry is not a run record
// that leaderrun could have written.
var ErrBadRun = errors.New("not a valid run record")

// RunBounds says which records a history may hold: those of lease Name,
// judged at Now (the reader's or writer's clock). ClockTokens is true for a
// store whose tokens are at least its clock in microseconds when they were
// minted (file, Redis, Azure), so that a token from the future is refused
// too.
type RunBounds struct {
	// Name is the lease whose history it is.
	Name string
	// Now is the clock the records are judged at.
	Now time.Time
	// ClockTokens: the store's tokens count its clock's microseconds.
	ClockTokens bool
}

// CheckRun returns nil when r could be a record leaderrun wrote into the
// history of b.Name, else an error wrapping ErrBadRun that says why: another
// lease's name, no token or one of 2^53 and up, no start, a start, end,
// grant or (ClockTokens) token later than b.Now + MaxClockSkew, an end too
// far before its start, an end without an outcome or an outcome without an end, an exit
// code outside 0-255, or a text field beyond 1 KiB. The text fields are not
// checked for what they hold: printing them is the printer's care.
func CheckRun(r Run, b RunBounds) error {
	latest := b.Now.Add(MaxClockSkew)
	var why string
	switch {
	case r.Name != b.Name:
		why = fmt.Sprintf("name %q, not %q", r.Name, b.Name)
	case r.Token == 0 || r.Token > maxRunToken:
		why = fmt.Sprintf("token %d", r.Token)
	case b.ClockTokens && r.Token > uint64(latest.UnixMicro()):
		why = fmt.Sprintf("token %d is the clock of %s, in the future", r.Token, time.UnixMicro(int64(min(r.Token, 1<<62))).UTC().Format(time.RFC3339))
	case r.Start.IsZero():
		why = "no start"
	case r.Start.After(latest):
		why = "start " + r.Start.UTC().Format(time.RFC3339) + " is in the future"
	case r.Granted.After(latest):
		why = "grant " + r.Granted.UTC().Format(time.RFC3339) + " is in the future"
	case r.Ended() && r.End.After(latest):
		why = "end " + r.End.UTC().Format(time.RFC3339) + " is in the future"
	case r.Ended() && r.End.Before(r.Start.Add(-MaxClockSkew)):
		why = "end before start"
	case r.Ended() != (r.Outcome != ""):
		why = "an end without an outcome, or an outcome without an end"
	case r.ExitCode < 0 || r.ExitCode > 255 || !r.Ended() && r.ExitCode != 0:
		why = fmt.Sprintf("exit code %d", r.ExitCode)
	case len(r.Label) > maxRunText || len(r.Outcome) > maxRunText || len(r.Signal) > maxRunText || len(r.Version) > maxRunText:
		why = "a field longer than 1 KiB"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrBadRun, why)
}

// NewestRuns returns the valid runs among runs (CheckRun), one per token
// (of two with the same token, the one with an end; else the later in
// runs), newest first, at most keep of them (keep <= 0: all). It is the
// selection every store's trim and read make, so that what is not a valid
// record never takes a valid one's place.
func NewestRuns(runs []Run, b RunBounds, keep int) []Run {
	byToken := make(map[uint64]int, len(runs))
	out := make([]Run, 0, len(runs))
	for _, r := range runs {
		if CheckRun(r, b) != nil {
			continue
		}
		if i, ok := byToken[r.Token]; ok {
			if !out[i].Ended() || r.Ended() {
				out[i] = r
			}
			continue
		}
		byToken[r.Token] = len(out)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Run) int {
		switch {
		case a.Token > b.Token:
			return -1
		case a.Token < b.Token:
			return 1
		}
		return 0
	})
	if keep > 0 && len(out) > keep {
		out = out[:keep]
	}
	return out
}
