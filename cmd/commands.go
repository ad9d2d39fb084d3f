package cmd

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/lease"
)

// command is one form of leaderrun's command line: the run form or a
// subcommand that takes a lease NAME. commands lists them all, and
// everything that knows the forms is made from it: urfave's app and
// commands, the flag scopes of the pre-pass (flags.go), the flags'
// variables (flagVars), the suggestions for a mistyped command, the help
// and the man page and completions (DocApp).
type command struct {
	name     string // "" for the run form
	synopsis string // its line in leaderrun's usage after "leaderrun ", if not "<name> [flags] NAME"
	usage    string // what it does, in one line
	// description is its help text, hand-wrapped at 80 columns (see
	// reflow). A subcommand's last line, that its flags may come before
	// or after NAME, is added from its name (nameCommand).
	description string
	// flags returns its flags, each with its variable (if any) in EnvVars.
	flags func() []cli.Flag
	// do runs a subcommand on its one lease NAME; the run form is runCommand.
	do func(ctx context.Context, c *cli.Context, name string, e env, log *slog.Logger) *outcome
}

// commands are the forms of the command line, the run form first. A new
// flag goes into its form's flags function (or commonFlags); a new
// subcommand is a new row here.
var commands = []command{
	{synopsis: "[flags] -- COMMAND [ARGS...]", flags: runFlags,
		usage: "run a command under a distributed lease: exactly one instance at a time", description: description},
	{name: "status", flags: statusFlags, do: statusCommand, description: statusDescription,
		usage: "show who holds a lease (exit 0 held, 3 free, 4 unknown)"},
	{name: "watch", flags: watchFlags, do: watchCommand, description: watchDescription,
		usage: "print a line each time the holder of a lease changes, until interrupted"},
	{name: "history", flags: historyFlags, do: historyCommand, description: historyDescription,
		usage: "print the last runs of a lease, from any host (newest first)"},
	{name: "check", synopsis: "check --ran-within DURATION [flags] NAME", flags: checkFlags, do: checkCommand, description: checkDescription,
		usage: "exit 0 if a run of a lease started within --ran-within (with --succeeded: ended with exit 0), 2 if none did"},
}

// subcommand returns the subcommand called word, or nil.
func subcommand(word string) *command {
	for i := range commands[1:] {
		if c := &commands[1+i]; c.name == word {
			return c
		}
	}
	return nil
}

// subcommandNames are the names of the subcommands, in the table's order.
func subcommandNames() []string {
	var names []string
	for _, c := range commands[1:] {
		names = append(names, c.name)
	}
	return names
}

// usageText is leaderrun's usage: one line per form.
func usageText() string {
	var lines []string
	for _, c := range commands {
		if c.synopsis == "" {
			c.synopsis = c.name + " [flags] NAME"
		}
		lines = append(lines, "leaderrun "+c.synopsis)
	}
	return strings.Join(lines, "\n")
}

// flagVars maps each flag's name to its variable (LEADERRUN_TTL for ttl),
// read from the flag definitions, where EnvVars declares it, on first use
// (building every form's flags costs about 400 allocations, which
// --version and a dispatch to a store program never need). It never
// changes.
var flagVars = sync.OnceValue(func() map[string]string {
	var all []cli.Flag
	for _, c := range commands {
		all = append(all, c.flags()...)
	}
	return varsOf(all)
})

// commonFlags are the flags of every form: run, status and watch.
func commonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "store", EnvVars: []string{"LEADERRUN_STORE"}, DefaultText: "file store in ~/.local/state/leaderrun", Usage: "where the lease lives, a `URL`: file:///dir (excludes processes of one host only), or a store every host reaches: redis://host:port (also rediss://, unix://, redis+sentinel://, redis+cluster://), postgres://user@host/db (postgresql://), etcd://host:2379 (etcds://), azblob://ACCOUNT/CONTAINER (azblob+https://, azblob+http://)"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"LEADERRUN_LOG_FORMAT"}, Usage: "stderr log `FORMAT`: text or json"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, EnvVars: []string{"LEADERRUN_QUIET"}, DisableDefaultText: true, Usage: "log only warnings and errors (a clean run prints nothing)"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, EnvVars: []string{"LEADERRUN_VERBOSE"}, DisableDefaultText: true, Usage: "log every renewal and store call"},
	}
}

func runFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "name", EnvVars: []string{"LEADERRUN_NAME"}, DefaultText: "the base name of COMMAND", Usage: "lease `NAME` (letters, digits, . _ - /)"},
		&cli.StringFlag{Name: "wait", Value: "forever", EnvVars: []string{"LEADERRUN_WAIT"}, Usage: "how long to wait for a held lease: a `DURATION` such as 30s or 10m, 0 to try once, or forever"},
		&cli.BoolFlag{Name: "no-wait", Aliases: []string{"n"}, EnvVars: []string{"LEADERRUN_NO_WAIT"}, DisableDefaultText: true, Usage: "try once; same as --wait 0"},
		&cli.DurationFlag{Name: "ttl", Value: 15 * time.Second, EnvVars: []string{"LEADERRUN_TTL"}, Usage: "lease `DURATION` in the store: how long a crashed holder blocks others (azblob: 15s-60s; etcd: whole seconds, 2s up)"},
		&cli.DurationFlag{Name: "renew-every", EnvVars: []string{"LEADERRUN_RENEW_EVERY"}, DefaultText: "ttl/3", Usage: "renewal interval, a `DURATION` of at least 10ms"},
		&cli.DurationFlag{Name: "grace", Value: 3 * time.Second, EnvVars: []string{"LEADERRUN_GRACE"}, DefaultText: "3s, shrunk to fit a short --ttl unless given", Usage: "`DURATION` between the stop signal and SIGKILL"},
		&cli.DurationFlag{Name: "call-timeout", EnvVars: []string{"LEADERRUN_CALL_TIMEOUT"}, DefaultText: "renew-every/2", Usage: "bound on one store call, a `DURATION` of at least 5ms"},
		&cli.StringFlag{Name: "stop-signal", Value: "TERM", EnvVars: []string{"LEADERRUN_STOP_SIGNAL"}, Usage: "`SIGNAL` sent to the child's process group to stop it (name or number)"},
		&cli.StringFlag{Name: "health-cmd", EnvVars: []string{"LEADERRUN_HEALTH_CMD"}, Usage: "while leading, check the child's health with `CMD` (run by /bin/sh -c with the child's environment); after --health-retries failed checks in a row, stop the child, release the lease and exit 123"},
		&cli.DurationFlag{Name: "health-interval", Value: 10 * time.Second, EnvVars: []string{"LEADERRUN_HEALTH_INTERVAL"}, DefaultText: "10s, longer to fit a long --health-timeout unless given", Usage: "`DURATION` from the child's start, and from the end of each check, to the next check"},
		&cli.DurationFlag{Name: "health-timeout", Value: 5 * time.Second, EnvVars: []string{"LEADERRUN_HEALTH_TIMEOUT"}, DefaultText: "5s, shrunk to fit a short --health-interval or --ttl unless given", Usage: "a check still running after this `DURATION` is killed and counts as failed"},
		&cli.IntFlag{Name: "health-retries", Value: 3, EnvVars: []string{"LEADERRUN_HEALTH_RETRIES"}, Usage: "failed checks in a row (`N`) that make the leader step down"},
		&cli.DurationFlag{Name: "health-start-period", EnvVars: []string{"LEADERRUN_HEALTH_START_PERIOD"}, DefaultText: "none", Usage: "`DURATION` after the child's start during which failed checks do not count (until one passes)"},
		&cli.DurationFlag{Name: "hold-at-least", EnvVars: []string{"LEADERRUN_HOLD_AT_LEAST"}, DefaultText: "none", Usage: "keep the lease taken until this `DURATION` after the acquisition even when the child finishes sooner, kept by the store (cron on many hosts: one run per slot)"},
		&cli.StringFlag{Name: "once-per", EnvVars: []string{"LEADERRUN_ONCE_PER"}, DefaultText: "none", Usage: "run COMMAND only if the store's run history has no successful run that started in the current `PERIOD`: hour, day, week (from Monday) or month in --once-per-zone, or a duration such as 4h counted from the Unix epoch; else release the lease and exit --once-per-exit-code without starting it (cron on many hosts: once a day, a missed day caught up)"},
		&cli.StringFlag{Name: "once-per-zone", Value: DefaultOncePerZone, EnvVars: []string{"LEADERRUN_ONCE_PER_ZONE"}, Usage: "time `ZONE` of --once-per's hour, day, week and month: an IANA name such as Europe/Berlin, UTC, or Local (this host's; hosts in other zones would disagree)"},
		&cli.BoolFlag{Name: "once-per-any", EnvVars: []string{"LEADERRUN_ONCE_PER_ANY"}, DisableDefaultText: true, Usage: "with --once-per, a run that ended in any way counts, not only one with exit code 0"},
		&cli.IntFlag{Name: "once-per-exit-code", EnvVars: []string{"LEADERRUN_ONCE_PER_EXIT_CODE"}, Usage: "exit `CODE` when --once-per finds the period done and starts nothing"},
		&cli.IntFlag{Name: "history-keep", Value: lease.DefaultHistoryKeep, EnvVars: []string{"LEADERRUN_HISTORY_KEEP"}, Usage: "keep the last `N` runs of the lease in the store's run history (leaderrun history, check); 0 records nothing"},
		&cli.StringFlag{Name: "holder", EnvVars: []string{"LEADERRUN_HOLDER"}, DefaultText: "hostname:pid", Usage: "human `LABEL` for this instance, shown by status (printable text)"},
		&cli.StringFlag{Name: "contain", Value: containAuto, EnvVars: []string{"LEADERRUN_CONTAIN"}, Usage: "what holds the child's processes, a `MODE`: auto (a cgroup of its own where a cgroup v2 subtree is writable, else the process group), cgroup (refuse without one), or group"},
		&cli.StringSliceFlag{Name: "pass-env", EnvVars: []string{"LEADERRUN_PASS_ENV"}, Usage: "keep the variable `VAR` in the child's environment although leaderrun would remove it (a credential the store read, LEADERRUN_STORE with a password, LEADERRUN_NAME, LEADERRUN_HOLDER); repeatable, or comma-separated in the variable"},
		&cli.IntFlag{Name: "priority", EnvVars: []string{"LEADERRUN_PRIORITY"}, Usage: "rank `N` among the standbys: when the lease becomes free the live standby with the highest priority takes it first (a running leader is never pre-empted)"},
		&cli.DurationFlag{Name: "priority-step", EnvVars: []string{"LEADERRUN_PRIORITY_STEP"}, DefaultText: "the store's", Usage: "when the lease becomes free, hold back `D` for each live standby ranked above this one before trying (the store's δ by default: 100ms on file, 200ms on Redis, etcd and Kubernetes, 250ms on PostgreSQL, 2s on Azure); raise it where standbys may be slow to notice a release, so that the order holds"},
		&cli.IntFlag{Name: "slots", Value: 1, EnvVars: []string{"LEADERRUN_SLOTS"}, Usage: "let up to `N` instances hold the lease at once, each in a slot of its own with its own fencing token; the child gets its slot, 0 to N-1, in LEADERRUN_SLOT (every contender must give the same N)"},
		&cli.IntFlag{Name: "conflict-exit-code", Value: ExitConflict, EnvVars: []string{"LEADERRUN_CONFLICT_EXIT_CODE"}, Usage: "exit `CODE` when the lease is held and --wait ran out (cron users: 0)"},
	}, append(monitorFlags(), commonFlags()...)...)
}

func statusFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "json", DisableDefaultText: true, Usage: "print a JSON object"},
	}, commonFlags()...)
}

func watchFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "json", DisableDefaultText: true, Usage: "print one JSON object per change"},
		&cli.DurationFlag{Name: "interval", Value: time.Second, EnvVars: []string{"LEADERRUN_WATCH_INTERVAL"}, Usage: "how often to look, a `DURATION` of at least 10ms (file and Redis report changes as they happen; this is their fallback)"},
		&cli.BoolFlag{Name: "once", DisableDefaultText: true, Usage: "wait for the next change, print it and exit 0"},
	}, commonFlags()...)
}

// historyFlags are history's flags.
func historyFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "json", DisableDefaultText: true, Usage: "print a JSON array of runs"},
		&cli.StringFlag{Name: "format", DefaultText: "text", Usage: "`FORMAT` of the output: text, json (as --json), or prom (Prometheus metrics of the runs: last success, runs per outcome)"},
		&cli.IntFlag{Name: "limit", Value: 20, DefaultText: "20; all with --format prom", Usage: "show at most `N` runs (0: all the store keeps)"},
		&cli.DurationFlag{Name: "since", DefaultText: "no bound", Usage: "show only runs started within this `DURATION` before now"},
	}, commonFlags()...)
}

// checkFlags are check's flags.
func checkFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.DurationFlag{Name: "ran-within", DefaultText: "none: required", Usage: "a run must have started within this `DURATION` before now (a daily job: 25h)"},
		&cli.BoolFlag{Name: "succeeded", DisableDefaultText: true, Usage: "count only runs that ended with exit 0"},
		&cli.BoolFlag{Name: "json", DisableDefaultText: true, Usage: "print a JSON object"},
	}, commonFlags()...)
}

// flagKind is how a flag's value is checked.
type flagKind int

const (
	kindBool flagKind = iota
	kindString
	kindDuration
	kindWait // a duration, 0 or forever
	kindInt
)

// flagInfo is what preparse knows of one flag.
type flagInfo struct {
	name string // canonical long name
	kind flagKind
}

func kindOf(f cli.Flag) flagKind {
	switch unwrapNames(f).(type) {
	case *cli.BoolFlag:
		return kindBool
	case *cli.DurationFlag:
		return kindDuration
	case *cli.IntFlag:
		return kindInt
	}
	if namesOf(f)[0] == "wait" {
		return kindWait
	}
	return kindString
}

// scope is the flags one form of the command line accepts.
type scope struct {
	name  string // "" for the run form, else the subcommand
	flags map[string]flagInfo
}

func newScope(name string, flags []cli.Flag) scope {
	s := scope{name: name, flags: map[string]flagInfo{}}
	for _, f := range flags {
		names := namesOf(f)
		info := flagInfo{name: names[0], kind: kindOf(f)}
		for _, n := range names {
			s.flags[n] = info
		}
	}
	return s
}

// describe says which form a scope is, for messages.
func (s scope) describe() string {
	if s.name == "" {
		return "the run form (leaderrun [flags] -- COMMAND)"
	}
	return s.name
}
