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
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

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

const watchDescription = `Prints one line (or, with --json, one JSON object) each time the holder of
the lease NAME changes or a standby joins or leaves, starting with the
current state, until INT or TERM:

   TIME NAME: held by HOLDER, token N
   TIME NAME: free
   TIME NAME: standby HOLDER joined (priority P)
   TIME NAME: standby HOLDER left (priority P)
   TIME NAME: slot S of N held by HOLDER, token N  (--slots N; or: free)

The file and Redis stores report changes as they happen (within 100ms) and
are polled every --interval only as a fallback; Azure is polled every
--interval (jittered). --once prints only the next change, then exits 0.
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
	inv := &invocation{ctx: ctx, e: e, flags: formFlags(takeEnvNamed), log: slog.New(slog.DiscardHandler)}
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

// formFlags returns each form's flags (commands' order), each list passed
// through prepare: takeEnv to run, nothing to document.
func formFlags(prepare func([]cli.Flag) []cli.Flag) [][]cli.Flag {
	var out [][]cli.Flag
	for _, c := range commands {
		out = append(out, prepare(c.flags()))
	}
	return out
}

// invocation is what the steps of one run share.
type invocation struct {
	ctx    context.Context
	e      env
	flags  [][]cli.Flag // each form's flags, in commands' order
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
		log, _ = newLogger(inv.e.stdio.Err, inv.line.logFormat(inv.e.getenv), slog.LevelInfo, inv.e.getenv)
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

// runAction is the run form's action: COMMAND is what preparse found.
func (inv *invocation) runAction(flags []cli.Flag) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := inv.setup(c, flags); err != nil {
			return err
		}
		if len(inv.line.command) == 0 {
			return usagef("no command given: leaderrun [flags] -- COMMAND [ARGS...]")
		}
		inv.result = runCommand(inv.ctx, c, inv.line.command, inv.e, inv.log)
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
		Description:     reflow(sub.description + "\nFlags may come before or after NAME, and before " + strconv.Quote(sub.name) + "."),
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
			inv.result = sub.do(inv.ctx, c, c.Args().First(), inv.e, inv.log)
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
		Description:            reflow(run.description),
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
	inv := &invocation{e: env{stdio: Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}}, flags: formFlags(noop)}
	return inv.app()
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
	b.Grow(len(s)) // it never grows: every run builds its help texts
	open := false  // the last line written continues on the next
	for i, more := 0, true; more; i++ {
		var line string
		line, s, more = strings.Cut(s, "\n")
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
		io.WriteString(w, wrapHelp(b.String(), helpWidth(w)))
	}
}
