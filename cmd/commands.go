package cmd

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/internal/cliflags"
	"github.com/leaderrun/leaderrun/internal/pingwire"
	"github.com/leaderrun/leaderrun/internal/run"
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
	// helptext.Reflow). A subcommand's last line, that its flags may come before
	// or after NAME, is added from its name (nameCommand).
	description string
	// flags returns its flags, each bound to its field of o and with its
	// variable (if any) in EnvVars.
	flags func(o *options) []cli.Flag
	// do runs a subcommand on its one lease NAME with its flags' values o;
	// the run form is runAction.
	do func(ctx context.Context, o *options, name string, e env, log *slog.Logger) *outcome
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
// read from the flag definitions, where EnvVars declares it, on first use:
// --version and a dispatch to a store program never build the flags. It
// never changes.
var flagVars = sync.OnceValue(func() map[string]string {
	var all []cli.Flag
	for _, c := range commands {
		all = append(all, c.flags(&options{})...)
	}
	return varsOf(all)
})

// commonFlags are the flags of every form: the run and each subcommand.
func commonFlags(o *options) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "store", Destination: &o.store, EnvVars: []string{"LEADERRUN_STORE"}, DefaultText: "file store in ~/.local/state/leaderrun", Usage: storeUsage()},
		&cli.StringFlag{Name: "log-format", Destination: &o.logFormat, Value: "text", EnvVars: []string{"LEADERRUN_LOG_FORMAT"}, Usage: "stderr log `FORMAT`: text or json"},
		&cli.BoolFlag{Name: "quiet", Destination: &o.quiet, Aliases: []string{"q"}, EnvVars: []string{"LEADERRUN_QUIET"}, DisableDefaultText: true, Usage: "log only warnings and errors (a clean run prints nothing)"},
		&cli.BoolFlag{Name: "verbose", Destination: &o.verbose, Aliases: []string{"v"}, EnvVars: []string{"LEADERRUN_VERBOSE"}, DisableDefaultText: true, Usage: "log every renewal and store call"},
	}
}

func runFlags(o *options) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "name", Destination: &o.run.Name, EnvVars: []string{"LEADERRUN_NAME"}, DefaultText: "the base name of COMMAND", Usage: "lease `NAME` (letters, digits, . _ - /)"},
		&cli.StringFlag{Name: "wait", Destination: &o.wait, Value: "forever", EnvVars: []string{"LEADERRUN_WAIT"}, Usage: "how long to wait for a held lease: a `DURATION` such as 30s or 10m, 0 to try once, or forever"},
		&cli.BoolFlag{Name: "no-wait", Destination: &o.noWait, Aliases: []string{"n"}, EnvVars: []string{"LEADERRUN_NO_WAIT"}, DisableDefaultText: true, Usage: "try once; same as --wait 0"},
		&cli.DurationFlag{Name: "ttl", Destination: &o.run.Timing.TTL, Value: 15 * time.Second, EnvVars: []string{"LEADERRUN_TTL"}, Usage: ttlUsage()},
		&cli.DurationFlag{Name: "renew-every", Destination: &o.run.Timing.RenewEvery, EnvVars: []string{"LEADERRUN_RENEW_EVERY"}, DefaultText: "ttl/3", Usage: "renewal interval, a `DURATION` of at least 10ms"},
		&cli.DurationFlag{Name: "grace", Destination: &o.run.Timing.Grace, Value: 3 * time.Second, EnvVars: []string{"LEADERRUN_GRACE"}, DefaultText: "3s, shrunk to fit a short --ttl unless given", Usage: "`DURATION` between the stop signal and SIGKILL"},
		&cli.DurationFlag{Name: "call-timeout", Destination: &o.run.Timing.CallTimeout, EnvVars: []string{"LEADERRUN_CALL_TIMEOUT"}, DefaultText: "renew-every/2", Usage: "bound on one store call, a `DURATION` of at least 5ms"},
		&cli.StringFlag{Name: "stop-signal", Destination: &o.stopSignal, Value: "TERM", EnvVars: []string{"LEADERRUN_STOP_SIGNAL"}, Usage: "`SIGNAL` sent to the child's process group to stop it (name or number)"},
		&cli.StringFlag{Name: "health-cmd", Destination: &o.run.Health.Cmd, EnvVars: []string{"LEADERRUN_HEALTH_CMD"}, Usage: "while leading, check the child's health with `CMD` (run by /bin/sh -c with the child's environment); after --health-retries failed checks in a row, stop the child, release the lease and exit 123"},
		&cli.DurationFlag{Name: "health-interval", Destination: &o.run.Health.Interval, Value: 10 * time.Second, EnvVars: []string{"LEADERRUN_HEALTH_INTERVAL"}, DefaultText: "10s, longer to fit a long --health-timeout unless given", Usage: "`DURATION` from the child's start, and from the end of each check, to the next check"},
		&cli.DurationFlag{Name: "health-timeout", Destination: &o.run.Health.Timeout, Value: 5 * time.Second, EnvVars: []string{"LEADERRUN_HEALTH_TIMEOUT"}, DefaultText: "5s, shrunk to fit a short --health-interval or --ttl unless given", Usage: "a check still running after this `DURATION` is killed and counts as failed"},
		&cli.IntFlag{Name: "health-retries", Destination: &o.run.Health.Retries, Value: 3, EnvVars: []string{"LEADERRUN_HEALTH_RETRIES"}, Usage: "failed checks in a row (`N`) that make the leader step down"},
		&cli.DurationFlag{Name: "health-start-period", Destination: &o.run.Health.StartPeriod, EnvVars: []string{"LEADERRUN_HEALTH_START_PERIOD"}, DefaultText: "none", Usage: "`DURATION` after the child's start during which failed checks do not count (until one passes)"},
		&cli.DurationFlag{Name: "hold-at-least", Destination: &o.run.Hold, EnvVars: []string{"LEADERRUN_HOLD_AT_LEAST"}, DefaultText: "none", Usage: "keep the lease taken until this `DURATION` after the acquisition even when the child finishes sooner, kept by the store (cron on many hosts: one run per slot)"},
		&cli.StringFlag{Name: "once-per", Destination: &o.oncePer, EnvVars: []string{"LEADERRUN_ONCE_PER"}, DefaultText: "none", Usage: "run COMMAND only if the store's run history has no successful run that started in the current `PERIOD`: hour, day, week (from Monday) or month in --once-per-zone, a cron schedule in --once-per-zone (5 fields such as '0 21 * * *', or @daily, @weekly, …: from one fire time to the next), or a duration such as 4h counted from the Unix epoch; else release the lease and exit --once-per-exit-code without starting it (cron on many hosts: once a day, a missed day caught up)"},
		&cli.StringFlag{Name: "once-per-zone", Destination: &o.oncePerZone, Value: DefaultOncePerZone, EnvVars: []string{"LEADERRUN_ONCE_PER_ZONE"}, Usage: "time `ZONE` of --once-per's hour, day, week, month and cron schedule: an IANA name such as Europe/Berlin, UTC, or Local (this host's; hosts in other zones would disagree)"},
		&cli.DurationFlag{Name: "once-per-deadline", Destination: &o.run.OncePer.Deadline, EnvVars: []string{"LEADERRUN_ONCE_PER_DEADLINE"}, DefaultText: "none", Usage: "with --once-per, a period whose run has not started within `D` of the period's start is not run late: exit as for a period done (as Kubernetes CronJob's startingDeadlineSeconds)"},
		&cli.DurationFlag{Name: "once-within", Destination: &o.run.OncePer.Within, EnvVars: []string{"LEADERRUN_ONCE_WITHIN"}, DefaultText: "none", Usage: "run COMMAND only if the store's run history has no successful run that started within the last `D` (on the store's clock, as --once-per; anacron's period); else release the lease and exit --once-per-exit-code; --once-per-any and --once-per-exit-code apply"},
		&cli.BoolFlag{Name: "once-per-any", Destination: &o.run.OncePer.Any, EnvVars: []string{"LEADERRUN_ONCE_PER_ANY"}, DisableDefaultText: true, Usage: "with --once-per, a run that ended in any way counts, not only one with exit code 0"},
		&cli.IntFlag{Name: "once-per-exit-code", Destination: &o.run.OncePer.Code, EnvVars: []string{"LEADERRUN_ONCE_PER_EXIT_CODE"}, Usage: "exit `CODE` when --once-per finds the period done and starts nothing"},
		&cli.IntFlag{Name: "history-keep", Destination: &o.run.HistoryKeep, Value: lease.DefaultHistoryKeep, EnvVars: []string{"LEADERRUN_HISTORY_KEEP"}, Usage: "keep the last `N` runs of the lease in the store's run history (leaderrun history, check); 0 records nothing"},
		&cli.StringFlag{Name: "holder", Destination: &o.run.Holder, EnvVars: []string{"LEADERRUN_HOLDER"}, DefaultText: "hostname:pid", Usage: "human `LABEL` for this instance, shown by status (printable text)"},
		&cli.StringFlag{Name: "contain", Destination: &o.contain, Value: run.ContainAuto, EnvVars: []string{"LEADERRUN_CONTAIN"}, Usage: "what holds the child's processes, a `MODE`: auto (a cgroup of its own where a cgroup v2 subtree is writable, else the process group), cgroup (refuse without one), or group"},
		&cli.StringSliceFlag{Name: "pass-env", Destination: &o.passEnv, EnvVars: []string{"LEADERRUN_PASS_ENV"}, Usage: "keep the variable `VAR` in the child's environment although leaderrun would remove it (a credential the store read, LEADERRUN_STORE with a password, LEADERRUN_NAME, LEADERRUN_HOLDER); repeatable, or comma-separated in the variable"},
		&cli.IntFlag{Name: "priority", Destination: &o.run.Priority, EnvVars: []string{"LEADERRUN_PRIORITY"}, Usage: "rank `N` among the standbys: when the lease becomes free the live standby with the highest priority takes it first (a running leader is never pre-empted)"},
		&cli.DurationFlag{Name: "priority-step", Destination: &o.run.PriorityStep, EnvVars: []string{"LEADERRUN_PRIORITY_STEP"}, DefaultText: "the store's", Usage: priorityStepUsage()},
		&cli.IntFlag{Name: "slots", Destination: &o.run.Slots, Value: 1, EnvVars: []string{"LEADERRUN_SLOTS"}, Usage: "let up to `N` instances hold the lease at once, each in a slot of its own with its own fencing token; the child gets its slot, 0 to N-1, in LEADERRUN_SLOT (every contender must give the same N)"},
		&cli.IntFlag{Name: "conflict-exit-code", Destination: &o.run.ConflictCode, Value: run.ExitConflict, EnvVars: []string{"LEADERRUN_CONFLICT_EXIT_CODE"}, Usage: "exit `CODE` when the lease is held and --wait ran out (cron users: 0)"},
	}, append(monitorFlags(o), commonFlags(o)...)...)
}

// monitorFlags are the run's monitoring flags (--ping, --metrics-file,
// --pod-label, --listen).
func monitorFlags(o *options) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ping", Destination: &o.ping, EnvVars: []string{"LEADERRUN_PING"}, Usage: "when this instance runs COMMAND, ping `URL` as dead-man's-switch services expect (as --ping-format says; healthchecks.io's: URL/start at the start, URL on exit 0, URL/CODE otherwise); never delays the run (at most 2s more at its end); the URL's path and query are kept secret"},
		&cli.StringFlag{Name: "ping-format", Destination: &o.pingFormat, Value: pingwire.Auto, EnvVars: []string{"LEADERRUN_PING_FORMAT"}, Usage: "whose conventions --ping follows, a `FORMAT`: hc (healthchecks.io and the services that share its URLs), kuma (an Uptime Kuma push URL), cronitor (Cronitor's telemetry URL), betterstack (a Better Stack heartbeat URL), or auto: from the URL (cronitor.link, Better Stack's heartbeat URLs, a path /api/push/TOKEN), else hc"},
		&cli.BoolFlag{Name: "ping-skipped", Destination: &o.run.Monitor.PingSkipped, EnvVars: []string{"LEADERRUN_PING_SKIPPED"}, DisableDefaultText: true, Usage: "with --ping, an instance that did not run COMMAND (the lease was held and --wait ran out) pings URL/log, which records an event without changing the check's state (--ping-format hc only: the others have no such event)"},
		&cli.IntFlag{Name: "ping-output-tail", Destination: &o.run.Monitor.OutputTail, EnvVars: []string{"LEADERRUN_PING_OUTPUT_TAIL"}, DefaultText: "0, off", Usage: "with --ping, a failure's ping carries the last `BYTES` (at most 100000) of COMMAND's stdout and stderr, cut to what the service keeps (2000 for kuma and cronitor); off by default, as output can hold secrets; the streams that are not a terminal then reach their place through a pipe that leaderrun-ping copies on"},
		&cli.StringFlag{Name: "metrics-file", Destination: &o.run.Monitor.MetricsFile, EnvVars: []string{"LEADERRUN_METRICS_FILE"}, Usage: "when this instance has run COMMAND, write the run's metrics to `PATH` in Prometheus' text format (node_exporter's textfile collector: a *.prom file in its directory), replaced atomically"},
		&cli.StringFlag{Name: "pod-label", Destination: &o.podLabel, EnvVars: []string{"LEADERRUN_POD_LABEL"}, Usage: "with the Kubernetes store, in a Pod: while this instance runs COMMAND its Pod (POD_NAME, else HOSTNAME) carries the label `KEY=VALUE`, taken off every other Pod that has it, and off again when it stops leading, so that a Service selecting it reaches the leader"},
		&cli.StringFlag{Name: "listen", Destination: &o.listen, EnvVars: []string{"LEADERRUN_LISTEN"}, Usage: "serve, for as long as this instance runs, GET /leader (200 while it holds the lease and runs COMMAND, 503 otherwise: for a load balancer's health check), /status (JSON) and /metrics (Prometheus) on `ADDR`: HOST:PORT, :PORT (127.0.0.1) or unix:PATH; an address in use is refused before anything starts"},
	}
}

func statusFlags(o *options) []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "json", Destination: &o.json, DisableDefaultText: true, Usage: "print a JSON object"},
	}, commonFlags(o)...)
}

func watchFlags(o *options) []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "json", Destination: &o.json, DisableDefaultText: true, Usage: "print one JSON object per change"},
		&cli.DurationFlag{Name: "interval", Destination: &o.interval, Value: time.Second, EnvVars: []string{"LEADERRUN_WATCH_INTERVAL"}, Usage: intervalUsage()},
		&cli.BoolFlag{Name: "once", Destination: &o.once, DisableDefaultText: true, Usage: "wait for the next change, print it and exit 0"},
	}, commonFlags(o)...)
}

// historyFlags are history's flags.
func historyFlags(o *options) []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "json", Destination: &o.json, DisableDefaultText: true, Usage: "print a JSON array of runs"},
		&cli.StringFlag{Name: "format", Destination: &o.format, DefaultText: "text", Usage: "`FORMAT` of the output: text, json (as --json), or prom (Prometheus metrics of the runs: last success, runs per outcome)"},
		&cli.IntFlag{Name: "limit", Destination: &o.limit, Value: 20, DefaultText: "20; all with --format prom", Usage: "show at most `N` runs (0: all the store keeps)"},
		&cli.DurationFlag{Name: "since", Destination: &o.since, DefaultText: "no bound", Usage: "show only runs started within this `DURATION` before now"},
	}, commonFlags(o)...)
}

// checkFlags are check's flags.
func checkFlags(o *options) []cli.Flag {
	return append([]cli.Flag{
		&cli.DurationFlag{Name: "ran-within", Destination: &o.ranWithin, DefaultText: "none: required", Usage: "a run must have started within this `DURATION` before now (a daily job: 25h)"},
		&cli.BoolFlag{Name: "succeeded", Destination: &o.succeeded, DisableDefaultText: true, Usage: "count only runs that ended with exit 0"},
		&cli.BoolFlag{Name: "json", Destination: &o.json, DisableDefaultText: true, Usage: "print a JSON object"},
	}, commonFlags(o)...)
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
	switch cliflags.Unwrap(f).(type) {
	case *cli.BoolFlag:
		return kindBool
	case *cli.DurationFlag:
		return kindDuration
	case *cli.IntFlag:
		return kindInt
	}
	if cliflags.Names(f)[0] == "wait" {
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
		names := cliflags.Names(f)
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
