// Package cmd is leaderrun's command line: its forms (commands.go), their
// flags bound to options and read from their LEADERRUN_* variables, the one
// validation pass that makes the run's config (runconfig.go; internal/run
// runs it), the read-only commands status, watch, history and check, help,
// the choice of store from --store (or of the program that serves it), and
// the final line with its exit code.
package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/internal/buildinfo"
	"github.com/leaderrun/leaderrun/internal/dispatch"
	"github.com/leaderrun/leaderrun/internal/helptext"
	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/internal/stderrlog"
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
	// origin is what a leaderrun that dispatched the run to this program
	// said: the guard's program, and that it was dispatched.
	origin dispatch.Origin
}

// getenv returns the value of variable k ("" when unset); the last of
// duplicates wins, as with getenv(3) on an environment built by appending.
func (e env) getenv(k string) string {
	v, _ := e.lookupEnv(k)
	return v
}

// lookupEnv returns the value of variable k and whether it is set at all
// (set to "" included), as os.LookupEnv does.
func (e env) lookupEnv(k string) (string, bool) {
	for i := len(e.vars) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(e.vars[i], k); ok && strings.HasPrefix(v, "=") {
			return v[1:], true
		}
	}
	return "", false
}

// environ returns the environment, os.Environ form.
func (e env) environ() []string { return e.vars }

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
and --wait ran out; 123 the --health-cmd check failed, child stopped; 124
leadership lost, child stopped; 125 leaderrun failed (usage, configuration,
store); 126 not executable; 127 not found.`

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
	return buildinfo.Text(stampedVersion, bi)
}

const statusDescription = `Prints who holds the lease NAME in the store, and the instances waiting
for it (standbys) in the order they would take over:

   NAME: held by HOLDER since TIME ZONE (AGE ago), token N[, expires in D unless renewed]
   NAME: free
   NAME: K of N slots held                        (--slots N)
     slot S: held by HOLDER since TIME ZONE, token N
     last run: HOLDER, START–END ZONE, exit N
     standby 1: HOLDER, priority P, waiting since TIME (AGE ago)

(TIME carries a date when it is not today.) The last run is the newest in the
store's run history (see leaderrun history) other than the current holder's.
--json prints
{"name","held","holder","token","since","remaining_ms","standbys":[{"holder","priority","since"}],"last_run":{...}}
instead ("slots" and "holders":[{"slot","holder","token","since",...}] for a
lease with slots); "unknown":true when the store knows nothing of NAME.
Exit codes: 0 held, 3 free, 4 nothing known (no holder, standby or recorded
run: a name never used with this store, or mistyped), 125 error (usage,
configuration, store; a file store directory that does not exist).`

var watchDescription = `Prints one line (or, with --json, one JSON object) each time the holder of
the lease NAME changes or a standby joins or leaves, starting with the
current state, until INT or TERM:

   TIME NAME: held by HOLDER, token N
   TIME NAME: free
   TIME NAME: standby HOLDER joined (priority P)
   TIME NAME: standby HOLDER left (priority P)
   TIME NAME: slot S of N held by HOLDER, token N  (--slots N; or: free)

` + watchStoresText() + `
Exit codes: 0 after INT or TERM (or the change, with --once), 125 error
(usage, configuration, the store unreachable at the start).`

// Main runs leaderrun with args (args[0] is the program name) and environ
// (os.Environ form: its variables, and the child's environment, come from
// it) and returns its exit code. It never calls os.Exit. When the process was started as
// leaderrun's guard (runner.IsGuard), Main is the guard instead. stores are
// the stores linked into the calling program besides the file store; a
// --store URL of another known store is handed to its own program
// (dispatch).
func Main(ctx context.Context, args, environ []string, stdio Stdio, stores ...LinkedStore) int {
	if runner.IsGuard(args) {
		return runner.GuardMain(args)
	}
	if len(args) == 2 && args[1] == "--version" {
		// What urfave prints for it, without building the command line.
		fmt.Fprintln(stdio.Out, versionText())
		return 0
	}
	register(stores)
	vars, origin := dispatch.Take(environ)
	e := env{stdio: stdio, vars: vars, origin: origin}
	say.UseTZ(e.getenv)
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
	inv := &invocation{ctx: ctx, e: e, opts: &options{}, log: slog.New(slog.DiscardHandler)}
	inv.flags = formFlags(inv.opts, takeEnvNamed)
	inv.line = preparse(args, hasDash, dashed, inv.scopes())
	if err := inv.line.err; err != nil {
		return inv.finish(err)
	}
	if !hasDash && len(inv.line.command) > 0 {
		if err := nearCommand(inv.line.command[0]); err != nil {
			return inv.finish(err)
		}
	}
	// A store served by another program gets the run before urfave parses
	// anything here (each store program parses and checks it all again).
	if raw, ok := inv.line.dispatchable(e.getenv); ok {
		if err := e.dispatch(raw); err != nil {
			return inv.finish(err)
		}
	}
	return inv.finish(inv.app().RunContext(ctx, append([]string{prog}, inv.line.args...)))
}

// formFlags returns each form's flags (commands' order), bound to o, each
// list passed through prepare: takeEnv to run, nothing to document.
func formFlags(o *options, prepare func([]cli.Flag) []cli.Flag) [][]cli.Flag {
	var out [][]cli.Flag
	for _, c := range commands {
		out = append(out, prepare(c.flags(o)))
	}
	return out
}

// invocation is what the steps of one run share.
type invocation struct {
	ctx    context.Context
	e      env
	opts   *options     // every flag's value
	flags  [][]cli.Flag // each form's flags, bound to opts, in commands' order
	line   cmdLine
	log    *slog.Logger // discards until the flags are read
	result *outcome     // set by the command that ran
}

// scopes are the forms' flags for preparse, the run form first, with the
// flags urfave adds.
func (inv *invocation) scopes() []scope {
	var out []scope
	for i, c := range commands {
		extra := []cli.Flag{cli.HelpFlag}
		if c.name == "" {
			extra = append(extra, cli.VersionFlag)
		}
		out = append(out, newScope(c.name, slices.Concat(inv.flags[i], extra)))
	}
	return out
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
		log, _ = stderrlog.New(inv.e.stdio.Err, inv.line.logFormat(inv.e.getenv), slog.LevelInfo, inv.e.getenv)
	}
	log.Log(inv.ctx, result.level, oneLine(result.msg), append(result.attrs, "exit_code", result.code)...)
	return result.code
}

// setup reads the variables of flags, then makes the logger the flags ask
// for, refuses a store variable that is misspelt while no store is given
// (strayStoreVar) and warns of other misspelt variables.
func (inv *invocation) setup(c *cli.Context, flags []cli.Flag) error {
	o := inv.opts
	if err := applyEnv(c, o, flags, inv.e.lookupEnv); err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.quiet {
		level = slog.LevelWarn
	}
	if o.verbose {
		level = slog.LevelDebug
	}
	if !stderrlog.ValidFormat(o.logFormat) {
		return usagef("%s: want text or json", o.spell("log-format", strconv.Quote(o.logFormat)))
	}
	l, err := stderrlog.New(inv.e.stdio.Err, o.logFormat, level, inv.e.getenv)
	if err != nil {
		return usageError{err}
	}
	inv.log = l
	if o.store == "" {
		if err := strayStoreVar(inv.e.environ(), inv.e.getenv); err != nil {
			return err
		}
	}
	if o.oncePer == "" {
		if err := strayOncePerVar(inv.e.environ()); err != nil {
			return err
		}
	}
	for _, w := range misspeltVars(inv.e.environ()) {
		l.Warn(w)
	}
	return nil
}

// strayOncePerVar refuses a run without --once-per while a misspelling of
// LEADERRUN_ONCE_PER is set (LEADERRUN_ONCE_PR=day): ignoring it, as other
// misspelt variables are (with a warning), would run a job every time that
// was meant to run once a period.
func strayOncePerVar(environ []string) error {
	want := envOf("once-per")
	known := knownVars()
	for _, k := range unknownVars(environ) {
		if nearestVar(k, known) == want {
			return usagef("%s is not a leaderrun variable; did you mean %s? Without it every run would start COMMAND: nothing was run", printable(k), want)
		}
	}
	return nil
}

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

// runAction is the run form's action: COMMAND is what preparse found.
func (inv *invocation) runAction(flags []cli.Flag) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := inv.setup(c, flags); err != nil {
			return err
		}
		if len(inv.line.command) == 0 {
			return usagef("no command given: leaderrun [flags] -- COMMAND [ARGS...]")
		}
		cfg, err := runConfig(inv.opts, inv.line.command, inv.e, inv.log)
		if err != nil {
			return err
		}
		// A store served by another program gets the whole run (this
		// process is replaced); invoke did so already for what it could
		// tell from the arguments.
		if err := inv.e.dispatch(inv.opts.store); err != nil {
			return err
		}
		inv.result = fromRun(run.Run(inv.ctx, cfg))
		return nil
	}
}

// nameCommand is urfave's command for sub, a subcommand that takes exactly
// one lease NAME.
func (inv *invocation) nameCommand(sub command, flags []cli.Flag) *cli.Command {
	return &cli.Command{
		Name:            sub.name,
		Usage:           sub.usage,
		UsageText:       "leaderrun " + sub.name + " [flags] NAME",
		Description:     helptext.Reflow(sub.description + "\nFlags may come before or after NAME, and before " + strconv.Quote(sub.name) + "."),
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
				return usagef("%s needs a lease NAME: leaderrun %s [flags] NAME", sub.name, sub.name)
			default:
				return usagef("%s takes one lease NAME; got %d: %s", sub.name, c.NArg(), strings.Join(c.Args().Slice(), " "))
			}
			inv.result = sub.do(inv.ctx, inv.opts, c.Args().First(), inv.e, inv.log)
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
				return usagef("no help for %q: leaderrun help [%s]", c.Args().First(), strings.Join(subcommandNames(), "|"))
			}
			return nil
		},
	}
}

// app is leaderrun's command line for urfave, made from commands: the run
// form is the app itself, the others its commands.
func (inv *invocation) app() *cli.App {
	run := commands[0]
	app := &cli.App{
		Name:                   "leaderrun",
		Usage:                  run.usage,
		UsageText:              usageText(),
		Description:            helptext.Reflow(run.description),
		Version:                version(),
		Flags:                  slices.Concat(inv.flags[0], []cli.Flag{cli.HelpFlag}),
		UseShortOptionHandling: false,
		Reader:                 inv.e.stdio.In,
		Writer:                 inv.e.stdio.Out,
		ErrWriter:              inv.e.stdio.Err,
		ExitErrHandler:         func(*cli.Context, error) {}, // only Main's caller exits
		OnUsageError:           onUsageError,
		Action:                 inv.runAction(inv.flags[0]),
	}
	for i, c := range commands[1:] {
		app.Commands = append(app.Commands, inv.nameCommand(c, inv.flags[1+i]))
	}
	app.Commands = append(app.Commands, helpCommand())
	return app
}

// DocApp returns leaderrun's command-line definition (its flags, commands
// and help texts), for a program that writes the man page and the shell
// completions from the same source as --help. Its actions must not be run.
func DocApp() *cli.App {
	noop := func(f []cli.Flag) []cli.Flag { return f } // with their variables, for the ENVIRONMENT section
	inv := &invocation{e: env{stdio: Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}}, opts: &options{}}
	inv.flags = formFlags(inv.opts, noop)
	return inv.app()
}

// wrapHelp wraps rendered help to width (helptext.Wrap).
func wrapHelp(s string, width int) string { return helptext.Wrap(s, width, isNameLine) }

// isNameLine reports whether a help line is NAME's "leaderrun [COMMAND] -
// what it does".
func isNameLine(text string) bool {
	name, _, ok := strings.Cut(text, " - ")
	f := strings.Fields(name)
	return ok && len(f) >= 1 && len(f) <= 2 && f[0] == "leaderrun" && (len(f) == 1 || subcommand(f[1]) != nil || f[1] == "help")
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
		io.WriteString(w, wrapHelp(b.String(), helptext.Width(w)))
	}
}
