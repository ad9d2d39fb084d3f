// Package cmd is leaderrun's command line: flags and their LEADERRUN_*
// environment variables, the run, status and watch commands, the choice of
// store from --store, and the one place that maps errors to exit codes.
package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// Stdio is the standard streams leaderrun and its child use.
type Stdio struct {
	In, Out, Err *os.File
}

// env is everything a command reads from outside: Main's arguments,
// environment and streams, nothing from the os package's copies.
type env struct {
	stdio Stdio
	// vars is the environment (os.Environ form): variables are read from
	// it, the child's environment is made from it, a store program
	// inherits it, and misspelt LEADERRUN_* variables are looked for in it.
	vars []string
	// argv is the whole command line Main was given (a store program is
	// started with it).
	argv []string
	// guardProgram is the program the guard runs from, when not this one
	// (see guardPath).
	guardProgram string
	// dispatched is true when a leaderrun dispatched the run to this
	// program: this program must then serve the store itself.
	dispatched bool
}

// getenv returns the value of variable k ("" when unset); the last of
// duplicates wins, as with getenv(3) on an environment built by appending.
func (e env) getenv(k string) string {
	for i := len(e.vars) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(e.vars[i], k); ok && strings.HasPrefix(v, "=") {
			return v[1:]
		}
	}
	return ""
}

// guardPath is the program the guard runs from: this one, unless a
// leaderrun dispatched the run to this program (envGuardProgram).
func (e env) guardPath() string {
	if e.guardProgram == "" {
		return "/proc/self/exe"
	}
	return e.guardProgram
}

// environ returns the environment, os.Environ form.
func (e env) environ() []string { return e.vars }

const usageText = `leaderrun [flags] -- COMMAND [ARGS...]
leaderrun status [flags] NAME
leaderrun watch [flags] NAME
leaderrun history [flags] NAME
leaderrun check --ran-within DURATION [flags] NAME`

const description = `Runs COMMAND while holding the lease NAME in a store, so that of many hosts or
jobs exactly one runs it at a time; the others wait (or give up at once with
--wait 0) and take over when the holder exits or dies. The lease is renewed in
the background; if a renewal cannot be confirmed in time, COMMAND's whole
process group is stopped before the lease can expire (exit 124).

COMMAND gets LEADERRUN_LEASE, LEADERRUN_LEASE_HOLDER and LEADERRUN_LEASE_TOKEN
(a fencing token that strictly increases with every acquisition; also as
LEADERRUN_TOKEN, deprecated) in its environment, without the credentials the
store read (see --pass-env).

Examples:
   # cron on many hosts: run the nightly job once, skip quietly if it runs elsewhere
   leaderrun -q --wait 0 --conflict-exit-code 0 --store redis://redis.internal:6379 -- /usr/local/bin/nightly

   # one host, no set-up: at most one backup at a time, queue the rest for 10 minutes
   leaderrun --wait 10m --name backup -- ./backup.sh --full

   # a systemd standby pair: the first to get the lease runs the daemon
   leaderrun --store redis://redis.internal:6379 --name billing-worker -- /usr/bin/billing-worker

   # who holds it?
   leaderrun status --store redis://redis.internal:6379 billing-worker

   # did last night's job succeed on any host? (exit 2 if not: alert)
   leaderrun check --store redis://redis.internal:6379 --ran-within 25h --succeeded nightly

Exit codes: the child's own code (128+N if killed by signal N); 75 lease held
and --wait ran out; 124 leadership lost, child stopped; 125 leaderrun failed
(usage, configuration, store); 126 not executable; 127 not found.`

// stampedVersion is the release's version, set when a release is built
// (go build -ldflags "-X github.com/leaderrun/leaderrun/cmd.stampedVersion=V",
// see scripts/release.sh); it wins over the module version.
var stampedVersion string

// version is the short version shown in --help: the stamped version, the
// module version, or dev.
func version() string {
	if stampedVersion != "" {
		return stampedVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionText is what --version prints: the module version, the VCS commit
// (and whether the tree was modified) and the Go version the binary was
// built with, all from the build info.
func versionText() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(bi)
}

// formatVersion formats bi (nil when the binary carries none).
func formatVersion(bi *debug.BuildInfo) string {
	v, goVersion := "dev", runtime.Version()
	var parts []string
	if bi != nil {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			c := "commit " + rev[:min(12, len(rev))]
			if modified == "true" {
				c += " with local changes"
			}
			parts = append(parts, c)
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	if stampedVersion != "" {
		v = stampedVersion
	}
	if v == "dev" && len(parts) == 0 {
		// Neither a release stamp, nor a module version, nor a commit: built
		// from a tree without VCS stamping (-buildvcs=false, no .git).
		parts = append(parts, "built without version information: no release stamp, module version or VCS commit, as with -buildvcs=false or outside a git checkout")
	}
	parts = append(parts, "built with "+goVersion+" for "+runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("leaderrun %s (%s)", v, strings.Join(parts, ", "))
}

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
		slotsFlag(),
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

const statusDescription = `Prints who holds the lease NAME in the store, and the instances waiting
for it (standbys) in the order they would take over:

   NAME: held by HOLDER since TIME ZONE (AGE ago), token N[, expires in D unless renewed]
   NAME: free
     last run: HOLDER, START–END ZONE, exit N
     standby 1: HOLDER, priority P, waiting since TIME (AGE ago)

(TIME carries a date when it is not today.) The last run is the newest in the
store's run history (see leaderrun history) other than the current holder's.
--json prints
{"name","held","holder","token","since","remaining_ms","standbys":[{"holder","priority","since"}],"last_run":{...}}
instead; "unknown":true when the store knows nothing of NAME.
Exit codes: 0 held, 3 free, 4 nothing known (no holder, standby or recorded
run: a name never used with this store, or mistyped), 125 error (usage,
configuration, store; a file store directory that does not exist).
Flags may come before or after NAME, and before "status".`

const watchDescription = `Prints one line (or, with --json, one JSON object) each time the holder of
the lease NAME changes or a standby joins or leaves, starting with the
current state, until INT or TERM:

   TIME NAME: held by HOLDER, token N
   TIME NAME: free
   TIME NAME: standby HOLDER joined (priority P)
   TIME NAME: standby HOLDER left (priority P)

The file and Redis stores report changes as they happen (within 100ms) and
are polled every --interval only as a fallback; Azure is polled every
--interval (jittered). --once prints only the next change, then exits 0.
Exit codes: 0 after INT or TERM (or the change, with --once), 125 error
(usage, configuration, the store unreachable at the start).
Flags may come before or after NAME, and before "watch".`

// Main runs leaderrun with args (args[0] is the program name) and environ
// (os.Environ form: its variables, and the child's environment, come from
// it) and returns its exit code. It never calls os.Exit. When the process was started as
// leaderrun's guard (runner.IsGuard), Main is the guard instead. stores are
// the stores linked into the calling program besides the file store; a
// --store URL of another known store is handed to its own program
// (dispatch).
func Main(ctx context.Context, args, environ []string, stdio Stdio, stores ...LinkedStore) int {
	if runner.IsGuard() {
		return runner.GuardMain()
	}
	register(stores)
	e := takeGuardProgram(env{stdio: stdio, vars: environ})
	useTZ(e.getenv)
	return invoke(ctx, args, e)
}

// invoke is Main without the process-wide set-up: it parses args (argv) and
// runs the command they name, and returns the exit code.
func invoke(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		args = []string{"leaderrun"}
	}
	e.argv = args
	prog, args := args[0], args[1:]
	// Everything after the first "--" is the command, never a subcommand or
	// flag: `leaderrun -- status` runs a program called status.
	var dashed []string
	hasDash := false
	if i := slices.Index(args, "--"); i >= 0 {
		dashed, args, hasDash = args[i+1:], args[:i], true
	}
	f := formFlags{
		run: takeEnv(runFlags()), status: takeEnv(statusFlags()), watch: takeEnv(watchFlags()),
		history: takeEnv(historyFlags()), check: takeEnv(checkFlags()),
	}
	inv := &invocation{ctx: ctx, e: e, args: args, hasDash: hasDash, scopes: f.scopes(), log: slog.New(slog.DiscardHandler)}
	p, err := preparse(args, hasDash, dashed, inv.scopes)
	if err != nil {
		return inv.finish(err)
	}
	if !hasDash && len(p.command) > 0 {
		if err := nearCommand(p.command[0]); err != nil {
			return inv.finish(err)
		}
	}
	// A store served by another program gets the run before urfave parses
	// anything here (each store program parses and checks it all again).
	if raw, ok := dispatchable(p.args, e.getenv); ok {
		if err := e.dispatch(raw); err != nil {
			return inv.finish(err)
		}
	}
	app := inv.app(f, p)
	if docApp != nil {
		docApp(app)
		return 0
	}
	return inv.finish(app.RunContext(ctx, append([]string{prog}, p.args...)))
}

// formFlags are the flags of each form of the command line.
type formFlags struct {
	run, status, watch, history, check []cli.Flag
}

// scopes are the forms' flags for preparse, the run form first.
func (f formFlags) scopes() []scope {
	return []scope{
		newScope("", slices.Concat(f.run, []cli.Flag{cli.HelpFlag, cli.VersionFlag})),
		newScope("status", slices.Concat(f.status, []cli.Flag{cli.HelpFlag})),
		newScope("watch", slices.Concat(f.watch, []cli.Flag{cli.HelpFlag})),
		newScope("history", slices.Concat(f.history, []cli.Flag{cli.HelpFlag})),
		newScope("check", slices.Concat(f.check, []cli.Flag{cli.HelpFlag})),
	}
}

// invocation is what the steps of one run share.
type invocation struct {
	ctx     context.Context
	e       env
	args    []string // the command line without the program name, up to "--"
	hasDash bool
	scopes  []scope
	log     *slog.Logger // discards until the flags are read
	result  *outcome     // set by the command that ran
}

// finish writes the last line for err or the command's outcome and returns
// the exit code.
func (inv *invocation) finish(err error) int {
	if err == nil && inv.result == nil {
		return 0 // help, --version
	}
	result := inv.result
	if err != nil {
		result = classify(err)
	}
	log := inv.log
	if log.Handler() == slog.DiscardHandler {
		// The failure came before the flags were read: honour the log
		// format anyway when it can be told from the arguments.
		log, _ = newLogger(inv.e.stdio.Err, guessLogFormat(inv.args, inv.hasDash, inv.scopes, inv.e.getenv), slog.LevelInfo, inv.e.getenv)
	}
	log.Log(inv.ctx, result.level, oneLine(result.msg), append(result.attrs, "exit_code", result.code)...)
	return result.code
}

// setup reads the variables of flags, then makes the logger the flags ask
// for, refuses a store variable that is misspelt while no store is given
// (strayStoreVar) and warns of other misspelt variables.
func (inv *invocation) setup(c *cli.Context, flags []cli.Flag) error {
	if err := applyEnv(c, flags, inv.e.getenv); err != nil {
		return err
	}
	level := slog.LevelInfo
	if c.Bool("quiet") {
		level = slog.LevelWarn
	}
	if c.Bool("verbose") {
		level = slog.LevelDebug
	}
	l, err := newLogger(inv.e.stdio.Err, c.String("log-format"), level, inv.e.getenv)
	if err != nil {
		return usageError{err}
	}
	inv.log = l
	if c.String("store") == "" {
		if err := strayStoreVar(inv.e.environ(), inv.e.getenv); err != nil {
			return err
		}
	}
	for _, w := range misspeltVars(inv.e.environ()) {
		l.Warn(w)
	}
	return nil
}

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

// nameCommand declares a subcommand that takes exactly one lease NAME.
func (inv *invocation) nameCommand(name, usage, description string, flags []cli.Flag, do func(context.Context, *cli.Context, string, env, *slog.Logger) *outcome) *cli.Command {
	return &cli.Command{
		Name:            name,
		Usage:           usage,
		UsageText:       "leaderrun " + name + " [flags] NAME",
		Description:     reflow(description),
		ArgsUsage:       "NAME",
		Flags:           flags,
		HideHelpCommand: true, // `status help` asks about a lease called help
		OnUsageError:    onUsageError,
		Action: func(c *cli.Context) error {
			if err := inv.setup(c, flags); err != nil {
				return err
			}
			switch c.NArg() {
			case 1:
			case 0:
				return usagef("%s needs a lease NAME: leaderrun %s [flags] NAME", name, name)
			default:
				return usagef("%s takes one lease NAME; got %d: %s", name, c.NArg(), strings.Join(c.Args().Slice(), " "))
			}
			inv.result = do(inv.ctx, c, c.Args().First(), inv.e, inv.log)
			return nil
		},
	}
}

// helpCommand is our own help command: urfave's has the alias "h", which
// would make `leaderrun h` show help instead of running a program called h.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show this help, or a command's (leaderrun help status)",
		ArgsUsage: "[COMMAND]",
		HideHelp:  true,
		Action: func(c *cli.Context) error {
			parent := c.Lineage()[1]
			if !c.Args().Present() {
				return cli.ShowAppHelp(parent)
			}
			if err := cli.ShowCommandHelp(parent, c.Args().First()); err != nil {
				return usagef("no help for %q: leaderrun help [status|watch|history|check]", c.Args().First())
			}
			return nil
		},
	}
}

// app is leaderrun's command line for urfave: the run form (p.command is
// its COMMAND) and the subcommands.
func (inv *invocation) app(f formFlags, p parsed) *cli.App {
	return &cli.App{
		Name:                   "leaderrun",
		Usage:                  "run a command under a distributed lease: exactly one instance at a time",
		UsageText:              usageText,
		Description:            reflow(description),
		Version:                version(),
		Flags:                  slices.Concat(f.run, []cli.Flag{cli.HelpFlag}),
		UseShortOptionHandling: false,
		Reader:                 inv.e.stdio.In,
		Writer:                 inv.e.stdio.Out,
		ErrWriter:              inv.e.stdio.Err,
		ExitErrHandler:         func(*cli.Context, error) {}, // only Main's caller exits
		OnUsageError:           onUsageError,
		Action: func(c *cli.Context) error {
			if err := inv.setup(c, f.run); err != nil {
				return err
			}
			if len(p.command) == 0 {
				return usagef("no command given: leaderrun [flags] -- COMMAND [ARGS...]")
			}
			inv.result = runCommand(inv.ctx, c, p.command, inv.e, inv.log)
			return nil
		},
		Commands: []*cli.Command{
			inv.nameCommand("status", "show who holds a lease (exit 0 held, 3 free, 4 unknown)", statusDescription, f.status, statusCommand),
			inv.nameCommand("watch", "print a line each time the holder of a lease changes, until interrupted", watchDescription, f.watch, watchCommand),
			inv.nameCommand("history", "print the last runs of a lease, from any host (newest first)", historyDescription, f.history, historyCommand),
			inv.nameCommand("check", "exit 0 if a run of a lease started within --ran-within (with --succeeded: ended with exit 0), 2 if none did", checkDescription, f.check, checkCommand),
			helpCommand(),
		},
	}
}

// docApp, when set, receives the app run would run, instead of running it.
var docApp func(*cli.App)

// DocApp returns leaderrun's command-line definition (its flags, commands
// and help texts), for a program that writes the man page and the shell
// completions from the same source as --help. Its actions must not be run.
// It is not safe for concurrent use.
func DocApp() *cli.App {
	var app *cli.App
	docApp = func(a *cli.App) { app = a }
	defer func() { docApp = nil }()
	invoke(context.Background(), []string{"leaderrun"}, env{stdio: Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}})
	if app != nil {
		// Give the flags back the variables takeEnv moved out, for the
		// documents' ENVIRONMENT section.
		restoreEnv(app.Flags)
		for _, c := range app.Commands {
			restoreEnv(c.Flags)
		}
	}
	return app
}

// helpWidth is the width help text wraps to: the terminal's, or
// defaultHelpWidth when the output is not a terminal.
func helpWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	return defaultHelpWidth
}

const defaultHelpWidth = 80

// reflow undoes the hand wrapping of a help text written in the source at
// 80 columns, so that wrapHelp wraps it once, to the width of the output:
// consecutive lines that start in the first column are one line, up to a
// line that ends a sentence or introduces something (".", ":"). Indented
// lines (examples, output formats) and blank lines are kept as they are.
func reflow(s string) string {
	var b strings.Builder
	open := false // the last line written continues on the next
	for i, line := range strings.Split(s, "\n") {
		prose := line != "" && line[0] != ' '
		switch {
		case i == 0:
		case open && prose:
			b.WriteByte(' ')
		default:
			b.WriteByte('\n')
		}
		b.WriteString(line)
		open = prose && !strings.HasSuffix(line, ".") && !strings.HasSuffix(line, ":")
	}
	return b.String()
}

// wrapHelp wraps each line of rendered help longer than width at spaces.
// Continuation lines are indented to the line's description column (the
// text after the first run of two or more spaces, as in a flag line, or
// after " - " in NAME) when that column leaves room, else to the line's own
// indentation, and deeper for a line of an indented block (an output
// format) so that it does not read as the next line of the block; a comment
// of an example continues as a comment, and an example command with a
// backslash, so that both can still be pasted into a shell.
func wrapHelp(s string, width int) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if len([]rune(line)) <= width {
			b.WriteString(line)
			continue
		}
		lead := len(line) - len(strings.TrimLeft(line, " "))
		text := line[lead:]
		head, pad, end := strings.Repeat(" ", lead), strings.Repeat(" ", lead), ""
		switch {
		case strings.HasPrefix(text, "# "):
			head, pad, text = head+"# ", pad+"# ", text[2:]
		case isNameLine(text):
			col := lead + strings.Index(text, " - ") + 3
			head, pad, text = line[:col], strings.Repeat(" ", col), line[col:]
		case strings.HasPrefix(text, "leaderrun "):
			pad, end = pad+"    ", " \\"
		case lead > 3 && !strings.Contains(text, "  "):
			pad += "    " // a line of an indented block
		default:
			if j := strings.Index(text, "  "); j >= 0 {
				col := lead + j + len(text[j:]) - len(strings.TrimLeft(text[j:], " "))
				if col <= width/2 {
					head, pad, text = line[:col], strings.Repeat(" ", col), line[col:]
				}
			}
		}
		cur := head
		n, fresh := len([]rune(cur)), true
		for _, w := range strings.Fields(text) {
			wl := len([]rune(w))
			if !fresh && n+1+wl+len(end) > width {
				b.WriteString(cur + end + "\n")
				cur, n, fresh = pad, len(pad), true
			}
			if !fresh {
				cur += " "
				n++
			}
			cur += w
			n += wl
			fresh = false
		}
		b.WriteString(cur)
	}
	return b.String()
}

// isNameLine reports whether a help line is NAME's "leaderrun [COMMAND] -
// what it does".
func isNameLine(text string) bool {
	name, _, ok := strings.Cut(text, " - ")
	f := strings.Fields(name)
	return ok && len(f) >= 1 && len(f) <= 2 && f[0] == "leaderrun" && (len(f) == 1 || isSubcommand(f[1]) || f[1] == "help")
}

// oneLine keeps a message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

func init() {
	// -v is --verbose here; --version has no short form.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", DisableDefaultText: true, Usage: "print the version, commit and Go version"}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, versionText()) }
	cli.FlagStringer = flagString(cli.FlagStringer)
	cli.HelpPrinter = func(w io.Writer, templ string, data any) {
		var b strings.Builder
		cli.HelpPrinterCustom(&b, templ, data, nil)
		io.WriteString(w, wrapHelp(b.String(), helpWidth(w)))
	}
}
