package run

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/internal/pingwire"
	"github.com/leaderrun/leaderrun/lease"
)

// Config is a run, validated: cmd fills it from the flags (each field's
// flag is named) and refuses what it cannot take before Run is called. A
// zero value means what the field says; the defaults named are the flags'.
type Config struct {
	// Args is COMMAND and its arguments; Args[0] is not empty.
	Args []string
	// Name is the lease name, valid (lease.ValidateName): --name, default
	// the base name of COMMAND.
	Name string
	// Holder labels this instance in the store: --holder, default
	// hostname:pid; printable, one line.
	Holder string
	// Wait is how long to wait for a held lease: --wait, default
	// lease.WaitForever; 0 tries once.
	Wait time.Duration
	// WaitGiven says --wait or --no-wait was given: a run nested in a lease
	// of its own name then waits for it anyway (refuseOwnAncestor).
	WaitGiven bool
	// Timing is --ttl (default 15s), --renew-every, --grace and
	// --call-timeout, with what was given explicitly; Run resolves it
	// against the store's limits (lease.Timing.Resolve).
	Timing lease.Timing
	// StopSignal stops the child: --stop-signal, default SIGTERM.
	StopSignal syscall.Signal
	// ConflictCode is the exit code when the lease stayed held:
	// --conflict-exit-code, default ExitConflict (75).
	ConflictCode int
	// Priority ranks this standby: --priority, default 0, within
	// ±MaxPriority.
	Priority int
	// PriorityStep is the hold-back per standby ranked above:
	// --priority-step; 0 is the store's δ.
	PriorityStep time.Duration
	// Contain is --contain: ContainAuto (the default), ContainCgroup or
	// ContainGroup.
	Contain string
	// PassEnv names the variables kept in the child's environment that the
	// run would remove (--pass-env; RemovableVars lists them).
	PassEnv map[string]bool
	// Health is the --health-* checks; a zero Cmd means none.
	Health HealthConfig
	// Hold keeps the lease taken until this long after the acquisition:
	// --hold-at-least, default 0 (none), at most MaxHold.
	Hold time.Duration
	// HistoryKeep is how many runs the store's history keeps:
	// --history-keep, default lease.DefaultHistoryKeep; 0 records nothing.
	HistoryKeep int
	// OncePer is --once-per and its companions; zero means none.
	OncePer OncePerConfig
	// Monitor is --ping and --metrics-file; zero means neither.
	Monitor MonitorConfig
	// Slots is how many instances may hold the lease at once: --slots,
	// default 1.
	Slots int

	// OpenStore opens the store (--store) with the options Run gives it.
	OpenStore func(ctx context.Context, o lease.OpenOptions) (lease.Store, error)
	// Warnings are logged once the run is set up, before the lease is
	// sought: remarks on a configuration that works (the default file
	// store in a CI job), which must not join a refusal's one line.
	Warnings []Warning
	// Environ is the environment, os.Environ form: the child's is made
	// from it. Getenv reads it (the last of duplicates wins).
	Environ []string
	Getenv  func(string) string
	// GuardProgram is the program the guard runs from; GuardTrusted says
	// it is known to be of this build (its child need not wait for its
	// handshake).
	GuardProgram string
	GuardTrusted bool
	// Stdin, Stdout and Stderr are the child's streams.
	Stdin, Stdout, Stderr *os.File
	// Log is where the run logs (stderr, as the flags chose).
	Log *slog.Logger
	// Version is leaderrun's version, written into the run history.
	Version string
	// RemindEvery is how often a waiting run says it still waits, at -v;
	// 0 is a minute.
	RemindEvery time.Duration
}

// HealthConfig is the --health-* checks, validated; Cmd "" means none.
type HealthConfig struct {
	Cmd         string        // --health-cmd, run by /bin/sh -c
	Interval    time.Duration // --health-interval, default 10s
	Timeout     time.Duration // --health-timeout, default 5s
	StartPeriod time.Duration // --health-start-period, default 0
	Retries     int           // --health-retries, default 3
}

// OncePerConfig is --once-per and its companions, validated; On false
// means --once-per was not given.
type OncePerConfig struct {
	Period lease.Period
	On     bool          // --once-per or --once-within was given
	Within time.Duration // --once-within: the window before now; 0: Period
	// Deadline is --once-per-deadline: a period whose run has not
	// started within Deadline of the period's start is not run late;
	// 0: none.
	Deadline time.Duration
	Any      bool // --once-per-any: any run that ended counts
	Code     int  // --once-per-exit-code, default 0
}

// MonitorConfig is the monitoring flags, validated.
type MonitorConfig struct {
	Ping        *url.URL        // --ping; nil: none
	PingFormat  pingwire.Format // --ping-format, resolved (never auto)
	PingProgram string          // the program that sends the pings (FindPingProgram)
	PingSkipped bool            // --ping-skipped
	// OutputTail is --ping-output-tail: how many of the last bytes of the
	// child's output a failure's ping carries; 0: none, and nothing
	// between the child and its output.
	OutputTail  int
	MetricsFile string // --metrics-file; "": none
	// Listen is --listen's address, "host:port" or "unix:PATH"; "": none.
	Listen        string
	ListenProgram string // the program that serves it (FindListenProgram)
	// PodLabel is --pod-label's label (ParsePodLabel); the zero value: none.
	PodLabel PodLabel
}

// Warning is a remark on the run's configuration (Config.Warnings): its
// line and the event it is logged as.
type Warning struct{ Msg, Event string }
