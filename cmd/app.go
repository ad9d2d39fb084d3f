// Package cmd is leaderrun's command line: flags and their LEADERRUN_*
// environment variables, the run, status and watch commands, the choice of
// store from --store, and the one place that maps errors to exit codes.
package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/runner"
)

// Stdio is the standard streams leaderrun and its child use.
type Stdio struct {
	In, Out, Err *os.File
}

// env is how the command reads its environment; tests replace it.
type env struct {
	stdio  Stdio
	getenv func(string) string
}

const usageText = `leaderrun [flags] -- COMMAND [ARGS...]
leaderrun status [flags] NAME
leaderrun watch [flags] NAME`

const description = `Runs COMMAND while holding the lease NAME in a store, so that of many hosts or
jobs exactly one runs it at a time; the others wait (or give up at once with
--wait 0) and take over when the holder exits or dies. The lease is renewed in
the background; if a renewal cannot be confirmed in time, COMMAND's whole
process group is stopped before the lease can expire (exit 124).

COMMAND gets LEADERRUN_NAME, LEADERRUN_HOLDER and LEADERRUN_TOKEN (a fencing
token that strictly increases with every acquisition) in its environment.

Examples:
   # cron on many hosts: run the nightly job once, skip quietly if it runs elsewhere
   leaderrun -q --wait 0 --conflict-exit-code 0 --store redis://redis.internal:6379 -- /usr/local/bin/nightly

   # one host, no set-up: at most one backup at a time, queue the rest for 10 minutes
   leaderrun --wait 10m --name backup -- ./backup.sh --full

   # a systemd standby pair: the first to get the lease runs the daemon
   leaderrun --store redis://redis.internal:6379 --name billing-worker -- /usr/bin/billing-worker

   # who holds it?
   leaderrun status --store redis://redis.internal:6379 billing-worker

Exit codes: the child's own code (128+N if killed by signal N); 75 lease held
and --wait ran out; 124 leadership lost, child stopped; 125 leaderrun failed
(usage, configuration, store); 126 not executable; 127 not found.`

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// storeFlag etc. are shared by every command.
func commonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "store", EnvVars: []string{"LEADERRUN_STORE"}, Usage: "where the lease lives: `URL` file:///dir, redis://host:port, rediss://, unix://, redis+sentinel://, redis+cluster://, azblob://ACCOUNT/CONTAINER (default: file store in ~/.local/state/leaderrun)"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"LEADERRUN_LOG_FORMAT"}, Usage: "stderr log format: text or json"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, EnvVars: []string{"LEADERRUN_QUIET"}, Usage: "log only warnings and errors (a clean run prints nothing)"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, EnvVars: []string{"LEADERRUN_VERBOSE"}, Usage: "log every renewal and store call"},
	}
}

func runFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "name", EnvVars: []string{"LEADERRUN_NAME"}, Usage: "lease `NAME` (letters, digits, . _ - /; default: the base name of COMMAND)"},
		&cli.StringFlag{Name: "wait", Value: "forever", EnvVars: []string{"LEADERRUN_WAIT"}, Usage: "how long to wait for a held lease: a `DURATION` such as 30s or 10m, 0 to try once, or forever"},
		&cli.BoolFlag{Name: "no-wait", Aliases: []string{"n"}, EnvVars: []string{"LEADERRUN_NO_WAIT"}, Usage: "try once; same as --wait 0"},
		&cli.DurationFlag{Name: "ttl", Value: 15 * time.Second, EnvVars: []string{"LEADERRUN_TTL"}, Usage: "lease duration in the store (how long a crashed holder blocks others; azblob: 15s-60s)"},
		&cli.DurationFlag{Name: "renew-every", EnvVars: []string{"LEADERRUN_RENEW_EVERY"}, Usage: "renewal interval (default: ttl/3)"},
		&cli.DurationFlag{Name: "grace", Value: 3 * time.Second, EnvVars: []string{"LEADERRUN_GRACE"}, Usage: "delay between the stop signal and SIGKILL (shrunk automatically to fit a short --ttl unless given)"},
		&cli.DurationFlag{Name: "call-timeout", EnvVars: []string{"LEADERRUN_CALL_TIMEOUT"}, Usage: "bound on one store call (default: renew-every/2)"},
		&cli.StringFlag{Name: "stop-signal", Value: "TERM", EnvVars: []string{"LEADERRUN_STOP_SIGNAL"}, Usage: "`SIGNAL` sent to the child's process group to stop it (name or number)"},
		&cli.StringFlag{Name: "holder", EnvVars: []string{"LEADERRUN_HOLDER"}, Usage: "human label for this instance, shown by status (default: hostname:pid)"},
		&cli.StringFlag{Name: "contain", Value: containAuto, EnvVars: []string{"LEADERRUN_CONTAIN"}, Usage: "what holds the child's processes, a `MODE`: auto (a cgroup of its own where a cgroup v2 subtree is writable, else the process group), cgroup (refuse without one), or group"},
		&cli.IntFlag{Name: "conflict-exit-code", Value: ExitConflict, EnvVars: []string{"LEADERRUN_CONFLICT_EXIT_CODE"}, Usage: "exit code when the lease is held and --wait ran out (cron users: 0)"},
	}, commonFlags()...)
}

// Main runs leaderrun with args (args[0] is the program name) and returns its
// exit code. It never calls os.Exit. When the process was started as
// leaderrun's guard (runner.IsGuard), Main is the guard instead.
func Main(ctx context.Context, args []string, stdio Stdio) int {
	if runner.IsGuard() {
		return runner.GuardMain()
	}
	return run(ctx, args, env{stdio: stdio, getenv: os.Getenv})
}

func run(ctx context.Context, args []string, e env) int {
	// Everything after the first "--" is the command, never a subcommand or
	// flag: `leaderrun -- status` runs a program called status.
	var command []string
	hasDash := false
	if i := slices.Index(args, "--"); i >= 0 {
		command, args, hasDash = args[i+1:], args[:i], true
	}
	var result *outcome
	log := slog.New(slog.DiscardHandler)
	setup := func(c *cli.Context) error {
		level := slog.LevelInfo
		if c.Bool("quiet") {
			level = slog.LevelWarn
		}
		if c.Bool("verbose") {
			level = slog.LevelDebug
		}
		l, err := newLogger(e.stdio.Err, c.String("log-format"), level, e.getenv)
		if err != nil {
			return usageError{err}
		}
		log = l
		return nil
	}
	// nameCommand declares a subcommand that takes exactly one lease NAME.
	nameCommand := func(name, usage string, flags []cli.Flag, do func(context.Context, *cli.Context, string, env, *slog.Logger) *outcome) *cli.Command {
		return &cli.Command{
			Name:         name,
			Usage:        usage,
			ArgsUsage:    "NAME",
			Flags:        append(flags, commonFlags()...),
			Before:       setup,
			OnUsageError: func(_ *cli.Context, err error, _ bool) error { return usageError{err} },
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 || hasDash {
					return usagef("%s takes exactly one lease NAME", name)
				}
				result = do(ctx, c, c.Args().First(), e, log)
				return nil
			},
		}
	}
	app := &cli.App{
		Name:                   "leaderrun",
		Usage:                  "run a command under a distributed lease: exactly one instance at a time",
		UsageText:              usageText,
		Description:            description,
		Version:                version(),
		Flags:                  runFlags(),
		HideHelpCommand:        true,
		UseShortOptionHandling: false,
		Reader:                 e.stdio.In,
		Writer:                 e.stdio.Out,
		ErrWriter:              e.stdio.Err,
		ExitErrHandler:         func(*cli.Context, error) {}, // only Main's caller exits
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		Before: setup,
		Action: func(c *cli.Context) error {
			cmdArgs := command
			if !hasDash {
				cmdArgs = c.Args().Slice()
			} else if c.Args().Len() > 0 {
				return usagef("unexpected %q before --; put flags before -- and the command after it", c.Args().First())
			}
			if len(cmdArgs) == 0 {
				return usagef("no command given: leaderrun [flags] -- COMMAND [ARGS...]")
			}
			result = runCommand(ctx, c, cmdArgs, e, log)
			return nil
		},
		Commands: []*cli.Command{
			nameCommand("status", "show who holds a lease (exit 0 held, 3 free, 125 error)", []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: "print a JSON object"},
			}, statusCommand),
			nameCommand("watch", "print a line each time the holder of a lease changes, until interrupted", []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object per change"},
				&cli.DurationFlag{Name: "interval", Value: time.Second, EnvVars: []string{"LEADERRUN_WATCH_INTERVAL"}, Usage: "how often to look"},
			}, watchCommand),
		},
	}
	err := app.RunContext(ctx, args)
	if err == nil && result == nil {
		return 0 // --help, --version
	}
	if err != nil {
		result = classify(err)
		if log.Handler() == slog.DiscardHandler || !log.Enabled(ctx, slog.LevelError) {
			// The failure happened before logging was set up.
			fmt.Fprintf(e.stdio.Err, "leaderrun: %s\n", oneLine(result.msg))
			return result.code
		}
	}
	log.Log(ctx, result.level, oneLine(result.msg), append(result.attrs, "exit_code", result.code)...)
	return result.code
}

// oneLine keeps a message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

func init() {
	// -v is --verbose here; --version has no short form.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version"}
}
