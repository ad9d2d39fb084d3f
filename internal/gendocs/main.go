// Command gendocs writes leaderrun's man page and its bash, zsh and fish
// completions from the same command-line definition --help prints
// (cmd.DocApp), so they cannot drift from it. It is a program of its own so
// that leaderrun does not link the man-page renderer's start-up cost twice
// over; scripts/release.sh runs it:
//
//	go run ./internal/gendocs -out DIR [-version V]
//
// writes DIR/leaderrun.1, DIR/leaderrun.bash, DIR/_leaderrun (zsh) and
// DIR/leaderrun.fish.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/pingwire"
	"github.com/leaderrun/leaderrun/lease/storetab"
)

func main() {
	out := flag.String("out", ".", "directory to write the man page and completions into")
	version := flag.String("version", "dev", "the version the man page names (scripts/release.sh passes the release's)")
	flag.Parse()
	if err := write(*out, cmd.DocApp(), *version); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

// write renders every document of app into dir; version is the one the man
// page names.
func write(dir string, app *cli.App, version string) error {
	if app == nil {
		return fmt.Errorf("cmd.DocApp returned no app")
	}
	if !slices.Contains(app.Flags, cli.VersionFlag) {
		app.Flags = append(app.Flags, cli.VersionFlag) // urfave adds it only when running
	}
	files := map[string]string{
		"leaderrun.1":    man(app, version),
		"leaderrun.bash": bash(app),
		"_leaderrun":     zsh(app),
		"leaderrun.fish": fish(app),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// manEnvironment is the man page's ENVIRONMENT section: the variable of
// every flag that has one (urfave's man page leaves them out).
func manEnvironment(app *cli.App) string {
	var b strings.Builder
	b.WriteString(".SH ENVIRONMENT\nEvery flag can also be set with its variable; a flag on the command line wins.\n")
	seen := map[string]bool{}
	all := slices.Clone(app.Flags)
	for _, c := range app.Commands {
		all = append(all, c.Flags...)
	}
	for _, f := range all {
		d, ok := f.(cli.DocGenerationFlag)
		if !ok {
			continue
		}
		for _, v := range d.GetEnvVars() {
			if seen[v] {
				continue
			}
			seen[v] = true
			fmt.Fprintf(&b, ".TP\n.B %s\nas \\-\\-%s\n", v, f.Names()[0])
		}
	}
	return b.String()
}

// flagInfo is what a completion needs of one flag.
type flagInfo struct {
	names []string // long names first, without dashes
	usage string   // the first clause of the help text
	value bool     // takes a value
}

func flags(fs []cli.Flag) []flagInfo {
	var out []flagInfo
	for _, f := range fs {
		names := slices.Clone(f.Names())
		slices.SortStableFunc(names, func(a, b string) int { return len(b) - len(a) })
		info := flagInfo{names: names}
		if d, ok := f.(cli.DocGenerationFlag); ok {
			info.usage = strings.ReplaceAll(firstClause(d.GetUsage()), "`", "")
			info.value = d.TakesValue()
		}
		out = append(out, info)
	}
	return out
}

// firstClause cuts a help text at its first colon, semicolon or parenthesis.
func firstClause(s string) string {
	if i := strings.IndexAny(s, ":;("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func dashed(n string) string {
	if len(n) == 1 {
		return "-" + n
	}
	return "--" + n
}

// commandFlags returns the flags of a subcommand, or the app's for "".
func commandFlags(app *cli.App, name string) []flagInfo {
	if name == "" {
		return flags(app.Flags)
	}
	for _, c := range app.Commands {
		if c.Name == name {
			return flags(append(slices.Clone(c.Flags), cli.HelpFlag))
		}
	}
	return nil
}

func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		names = append(names, c.Name)
	}
	return names
}

func words(fs []flagInfo) string {
	var w []string
	for _, f := range fs {
		for _, n := range f.names {
			w = append(w, dashed(n))
		}
	}
	return strings.Join(w, " ")
}

// valueFlags returns the words (--name, -x) of the flags of fs that take
// a value, for skipping the value while looking for the subcommand.
func valueFlags(fs []flagInfo) []string {
	var w []string
	for _, f := range fs {
		if f.value {
			for _, n := range f.names {
				w = append(w, dashed(n))
			}
		}
	}
	return w
}

// flagValues are the values bash offers after a flag, for the flags whose
// values are a short fixed list; any other flag's value is free text, for
// which nothing is offered.
var flagValues = map[string]string{
	"--log-format":  "text json",
	"--contain":     "auto cgroup group",
	"--stop-signal": "TERM INT HUP QUIT USR1 USR2 KILL",
	"--ping-format": pingFormats(),
	"--store":       storeSchemes(),
	"--once-per":    "hour day week month",
	"--format":      "text json prom",
}

// pingFormats is --ping-format's values.
func pingFormats() string {
	w := []string{pingwire.Auto}
	for _, f := range pingwire.Formats {
		w = append(w, string(f))
	}
	return strings.Join(w, " ")
}

// pathFlags are the flags whose value is a file name: the shells offer
// file names after them, and after no other flag that takes a value.
var pathFlags = map[string]bool{"--metrics-file": true}

// storeSchemes is every store's scheme, as the start of a URL (storetab).
func storeSchemes() string {
	var w []string
	for _, s := range storetab.Schemes() {
		w = append(w, s+"://")
	}
	return strings.Join(w, " ")
}

// bash: flags of the run or of the subcommand given, subcommands as the
// first word, a flag's value after a flag that takes one (a fixed list, or
// nothing), and after "--" the command: a command name first, then that
// command's own completion (bash-completion's _command_offset) or file
// names.
func bash(app *cli.App) string {
	var b strings.Builder
	all := commandFlags(app, "")
	for _, c := range app.Commands {
		all = append(all, commandFlags(app, c.Name)...)
	}
	takes := valueFlags(all)
	slices.Sort(takes)
	takes = slices.Compact(takes)
	b.WriteString("# bash completion for leaderrun; generated by internal/gendocs from the same definition as --help\n")
	b.WriteString("_leaderrun() {\n")
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev= sub= i\n")
	b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n")
	b.WriteString("\t\tcase ${COMP_WORDS[i]} in\n")
	b.WriteString("\t\t--)\n")
	b.WriteString("\t\t\tif ((i + 1 == COMP_CWORD)); then\n")
	b.WriteString("\t\t\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n")
	b.WriteString("\t\t\telif declare -F _command_offset >/dev/null; then\n")
	b.WriteString("\t\t\t\t_command_offset $((i + 1))\n")
	b.WriteString("\t\t\telse\n")
	b.WriteString("\t\t\t\tcompopt -o filenames 2>/dev/null\n")
	b.WriteString("\t\t\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n")
	b.WriteString("\t\t\tfi\n")
	b.WriteString("\t\t\treturn ;;\n")
	// A flag's value is skipped (it is no subcommand), or is the word
	// being completed.
	fmt.Fprintf(&b, "\t\t%s)\n\t\t\tif ((i + 1 < COMP_CWORD)); then ((i++)); else prev=${COMP_WORDS[i]}; fi ;;\n", strings.Join(takes, "|"))
	fmt.Fprintf(&b, "\t\t%s) [ -z \"$sub\" ] && sub=${COMP_WORDS[i]} ;;\n", strings.Join(commandNames(app), "|"))
	b.WriteString("\t\tesac\n\tdone\n")
	b.WriteString("\tif [ -n \"$prev\" ]; then\n\t\tcase $prev in\n")
	keys := slices.Sorted(maps.Keys(flagValues))
	for _, k := range keys {
		fmt.Fprintf(&b, "\t\t%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")) ;;\n", k, flagValues[k])
	}
	b.WriteString("\t\t*) COMPREPLY=() ;;\n\t\tesac\n")
	b.WriteString("\t\t[ \"$prev\" = --store ] && compopt -o nospace 2>/dev/null\n")
	b.WriteString("\t\treturn\n\tfi\n")
	b.WriteString("\tcase $cur in\n\t-*)\n\t\tcase $sub in\n")
	for _, c := range app.Commands {
		if fs := commandFlags(app, c.Name); len(fs) > 0 {
			fmt.Fprintf(&b, "\t\t%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")) ;;\n", c.Name, words(fs))
		}
	}
	fmt.Fprintf(&b, "\t\t*) COMPREPLY=($(compgen -W '-- %s' -- \"$cur\")) ;;\n", words(commandFlags(app, "")))
	b.WriteString("\t\tesac ;;\n")
	fmt.Fprintf(&b, "\t*) [ -z \"$sub\" ] && COMPREPLY=($(compgen -W '%s' -- \"$cur\")) ;;\n", strings.Join(commandNames(app), " "))
	b.WriteString("\tesac\n}\ncomplete -F _leaderrun leaderrun\n")
	return b.String()
}

// zshQuote escapes a description for _arguments' [...] and '...'.
func zshQuote(s string) string {
	return strings.NewReplacer("'", "'\\''", "[", "\\[", "]", "\\]", ":", "\\:").Replace(s)
}

func zshSpecs(fs []flagInfo) []string {
	var specs []string
	for _, f := range fs {
		for _, n := range f.names {
			spec := "'" + dashed(n) + "[" + zshQuote(f.usage) + "]"
			if f.value {
				spec += ":value:"
			}
			specs = append(specs, spec+"'")
		}
	}
	return specs
}

func zsh(app *cli.App) string {
	var b strings.Builder
	b.WriteString("#compdef leaderrun\n# zsh completion for leaderrun; generated by internal/gendocs from the same definition as --help\n")
	b.WriteString("_leaderrun() {\n\tlocal -a cmds\n\tcmds=(\n")
	for _, c := range app.Commands {
		fmt.Fprintf(&b, "\t\t'%s:%s'\n", c.Name, zshQuote(c.Usage))
	}
	b.WriteString("\t)\n\tlocal dd=${words[(I)--]}\n")
	b.WriteString("\tif (( dd && CURRENT > dd )); then\n\t\twords=(\"${(@)words[dd+1,-1]}\"); (( CURRENT -= dd )); _normal; return\n\tfi\n")
	b.WriteString("\tcase ${words[2]} in\n")
	for _, c := range app.Commands {
		fmt.Fprintf(&b, "\t%s) _arguments %s '*:lease name:' ;;\n", c.Name, strings.Join(zshSpecs(commandFlags(app, c.Name)), " "))
	}
	fmt.Fprintf(&b, "\t*) _arguments %s '1:command:_describe command cmds' ;;\n", strings.Join(zshSpecs(commandFlags(app, "")), " "))
	b.WriteString("\tesac\n}\n_leaderrun \"$@\"\n")
	return b.String()
}

func fishQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func fish(app *cli.App) string {
	var b strings.Builder
	b.WriteString("# fish completion for leaderrun; generated by internal/gendocs from the same definition as --help\n")
	// After "--" comes the command: its name, then its own completion.
	b.WriteString(`function __fish_leaderrun_dashdash
	contains -- -- (commandline -opc)
end
function __fish_leaderrun_command
	set -l tokens (commandline -opc)
	set -l i (contains -i -- -- $tokens)
	__fish_complete_subcommand --commandline $tokens[(math $i + 1)..-1] (commandline -ct)
end
complete -c leaderrun -n __fish_leaderrun_dashdash -f -a '(__fish_leaderrun_command)'
`)
	names := strings.Join(commandNames(app), " ")
	for _, c := range app.Commands {
		fmt.Fprintf(&b, "complete -c leaderrun -f -n 'not __fish_leaderrun_dashdash; and not __fish_seen_subcommand_from %s' -a %s -d %s\n", names, c.Name, fishQuote(c.Usage))
	}
	emit := func(cond string, fs []flagInfo) {
		for _, f := range fs {
			fmt.Fprintf(&b, "complete -c leaderrun -n %s", fishQuote("not __fish_leaderrun_dashdash; and "+cond))
			for _, n := range f.names {
				if len(n) == 1 {
					fmt.Fprintf(&b, " -s %s", n)
				} else {
					fmt.Fprintf(&b, " -l %s", n)
				}
			}
			switch long := "--" + f.names[0]; {
			case !f.value:
			case flagValues[long] != "":
				fmt.Fprintf(&b, " -x -a %s", fishQuote(flagValues[long]))
			case pathFlags[long]:
				b.WriteString(" -r -F")
			default:
				b.WriteString(" -x") // free text: no file names
			}
			fmt.Fprintf(&b, " -d %s\n", fishQuote(f.usage))
		}
	}
	emit("not __fish_seen_subcommand_from "+names, commandFlags(app, ""))
	for _, c := range app.Commands {
		emit("__fish_seen_subcommand_from "+c.Name, commandFlags(app, c.Name))
	}
	return b.String()
}
