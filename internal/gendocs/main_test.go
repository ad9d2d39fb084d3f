package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/storetab"
)

// The man page and every completion offer each flag that --help lists
// (testdata's help goldens are --help's output), and the subcommands.
func TestDocsCoverHelp(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir, cmd.DocApp(), "0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	flagRE := regexp.MustCompile(`(?m)^ {3}--([a-z-]+)`)
	for _, golden := range []string{"help.golden", "help-status.golden", "help-watch.golden", "help-history.golden", "help-check.golden"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", golden))
		if err != nil {
			t.Fatal(err)
		}
		flags := flagRE.FindAllStringSubmatch(string(b), -1)
		if len(flags) < 3 {
			t.Fatalf("%s: found only %d flags", golden, len(flags))
		}
		for _, m := range flags {
			f := m[1]
			for name, want := range map[string]string{
				"leaderrun.1":    `\fB\-\-` + strings.ReplaceAll(f, "-", `\-`) + `\fR`,
				"leaderrun.bash": "",
				"_leaderrun":     "'--" + f + "[",
				"leaderrun.fish": "-l " + f + " ",
			} {
				ok := strings.Contains(read(name), want)
				if name == "leaderrun.bash" {
					ok = regexp.MustCompile(`[\s']--` + f + `[\s']`).MatchString(read(name))
				}
				if !ok {
					t.Errorf("%s (from %s) lacks --%s", name, golden, f)
				}
			}
		}
	}
	for _, v := range []string{"LEADERRUN_STORE", "LEADERRUN_TTL", "LEADERRUN_WATCH_INTERVAL"} {
		if !strings.Contains(read("leaderrun.1"), ".B "+v+"\n") {
			t.Errorf("leaderrun.1's ENVIRONMENT lacks %s", v)
		}
	}
	for _, sub := range []string{"status", "watch", "history", "check"} {
		for _, name := range []string{"leaderrun.1", "leaderrun.bash", "_leaderrun", "leaderrun.fish"} {
			if !strings.Contains(read(name), sub) {
				t.Errorf("%s lacks the %s command", name, sub)
			}
		}
	}
}

// The completions parse in their shells, and fish's completes `--st` (bash's
// is driven by e2e's package test). A shell that is not installed fails the
// test with the line that installs it (scripts/test.sh installs them).
func TestCompletionsRun(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir, cmd.DocApp(), "0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ shell, file string }{{"bash", "leaderrun.bash"}, {"zsh", "_leaderrun"}, {"fish", "leaderrun.fish"}} {
		sh := needTool(t, c.shell, c.shell)
		if out, err := exec.Command(sh, "-n", filepath.Join(dir, c.file)).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", c.shell, c.file, err, out)
		}
		if c.shell == "fish" {
			out, err := exec.Command(sh, "-c", "source "+filepath.Join(dir, c.file)+"; complete -C 'leaderrun --st'").Output()
			if err != nil || !strings.Contains(string(out), "--store\t") || !strings.Contains(string(out), "--stop-signal\t") {
				t.Errorf("fish: leaderrun --st<TAB>: %v\n%s", err, out)
			}
			// After -- the command's own completion: ls's options, and
			// files; none of leaderrun's flags.
			fc := exec.Command(sh, "-c", "source "+filepath.Join(dir, c.file)+"; complete -C 'leaderrun --name x -- ls -'; complete -C 'leaderrun -- ls ma'")
			fc.Dir = "." // internal/gendocs: main.go, main_test.go, man.go
			out, err = fc.Output()
			if err != nil || !strings.Contains(string(out), "-A\t") || strings.Contains(string(out), "--store") || !strings.Contains(string(out), "main.go\n") {
				t.Errorf("fish: leaderrun -- ls -<TAB> and ls ma<TAB>: %v\n%s", err, out)
			}
			// A flag's value: its fixed list, or nothing for free text, and
			// file names only where the value is a file.
			for _, v := range []struct{ line, want, not string }{
				{"leaderrun --store ", "redis://", "main.go"},
				{"leaderrun --once-per ", "day", "main.go"},
				{"leaderrun --ttl ", "", "main.go"},
				{"leaderrun history x --format ", "prom", "main.go"},
				{"leaderrun --metrics-file ma", "main.go", "--store"},
			} {
				fc := exec.Command(sh, "-c", "source "+filepath.Join(dir, c.file)+"; complete -C '"+v.line+"'")
				fc.Dir = "."
				out, err := fc.Output()
				if err != nil || !strings.Contains(string(out), v.want) || strings.Contains(string(out), v.not) {
					t.Errorf("fish: %s<TAB> offered %q (%v); want %q and not %q", v.line, out, err, v.want, v.not)
				}
			}
		}
	}
}

// bashCompletionLib is bash-completion's library, whose _command_offset
// completes a command's own arguments after "--" when it is installed.
const bashCompletionLib = "/usr/share/bash-completion/bash_completion"

// The bash completion, driven in bash: a flag's value is never offered a
// subcommand (`--name <TAB>` offers nothing), a fixed list where the flag
// has one, the subcommand is found past a flag's value, and after `--` the
// command's name and then its own arguments (file names alone, and with
// bash-completion, which it needs, the command's own completion).
func TestBashCompletion(t *testing.T) {
	sh := needTool(t, "bash", "bash")
	dir := t.TempDir()
	if err := write(dir, cmd.DocApp(), "0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "README.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ words, want string }{
		{"leaderrun --name ''", ""},
		{"leaderrun --name x ''", "check help history status watch"},
		{"leaderrun --name status ''", "check help history status watch"},
		{"leaderrun --name x st", "status"},
		{"leaderrun --log-format ''", "json text"},
		{"leaderrun --once-per ''", "day hour month week"},
		{"leaderrun history x --format ''", "json prom text"},
		{"leaderrun --ping-format ''", "auto betterstack cronitor hc kuma"},
		{"leaderrun --ttl ''", ""},
		{"leaderrun --ping-o", "--ping-output-tail"},
		{"leaderrun --ping-output-tail ''", ""},
		{"leaderrun --st", "--stop-signal --store"},
		{"leaderrun --store x status --j", "--json"},
		{"leaderrun -- ls REA", "README.md"},
		{"leaderrun -q --name x -- ls REA", "README.md"},
	}
	script := func(libs ...string) string {
		var b strings.Builder
		for _, l := range libs {
			b.WriteString("source " + l + "\n")
		}
		// Outside a real completion compopt has nothing to act on.
		b.WriteString("compopt() { :; }\n")
		b.WriteString(`t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=(); _leaderrun 2>/dev/null; printf '%s\n' "${COMPREPLY[@]}" | sort -u | paste -sd' '; }` + "\n")
		for _, c := range cases {
			b.WriteString("t " + c.words + "\n")
		}
		return b.String()
	}
	check := func(what string, libs ...string) {
		t.Helper()
		c := exec.Command(sh, "--norc", "--noprofile", "-c", script(libs...))
		c.Dir = work
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: bash: %v\n%s", what, err, out)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(got) != len(cases) {
			t.Fatalf("%s: %d answers for %d cases:\n%s", what, len(got), len(cases), out)
		}
		for i, c := range cases {
			if got[i] != c.want {
				t.Errorf("%s: %s<TAB>: %q; want %q", what, c.words, got[i], c.want)
			}
		}
	}
	check("alone", filepath.Join(dir, "leaderrun.bash"))
	if _, err := os.Stat(bashCompletionLib); err != nil {
		t.Fatalf("bash-completion is not installed (%v): the completion after -- cannot be checked with it; install it with `apt-get install --no-install-recommends bash-completion` (scripts/test.sh does)", err)
	}
	check("with bash-completion", bashCompletionLib, filepath.Join(dir, "leaderrun.bash"))
}

// The man page: a SYNOPSIS of the forms as --help shows them (no urfave
// "[--flag]=[value]" list), defaults without `=""`, every exit code, each
// flag only under the forms that take it, colours, SEE ALSO; and it renders
// in man (which it needs) without a warning.
func TestManPage(t *testing.T) {
	dir := t.TempDir()
	app := cmd.DocApp()
	if err := write(dir, app, "0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "leaderrun.1"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, bad := range []string{`=""`, "[value]", "]=["} {
		if strings.Contains(page, bad) {
			t.Errorf("the man page has %q", bad)
		}
	}
	section := func(name string) string {
		_, rest, ok := strings.Cut(page, "\n.SH "+name+"\n")
		if !ok {
			t.Fatalf("the man page has no %s section", name)
		}
		s, _, _ := strings.Cut(rest, "\n.SH ")
		return s
	}
	if syn := section("SYNOPSIS"); strings.Count(syn, "\n")+1 != 2*len(strings.Split(strings.TrimSpace(app.UsageText), "\n"))-1 || !strings.Contains(syn, `\fB\-\-\fR \fICOMMAND\fR`) {
		t.Errorf("SYNOPSIS is not one line per form of the command line:\n%s", syn)
	}
	exits := section("EXIT STATUS")
	for _, code := range []string{"75", "123", "124", "125", "126", "127", "128+N", "2 (check)", "3 (status)", "4 (status)"} {
		if !strings.Contains(exits, "\n.B "+code+"\n") {
			t.Errorf("EXIT STATUS lacks %s", code)
		}
	}
	opts, cmds := section("OPTIONS"), section("COMMANDS")
	for _, f := range []string{"ttl", "name", "health-cmd", "priority"} {
		if !strings.Contains(opts, `\fB\-\-`+strings.ReplaceAll(f, "-", `\-`)+`\fR`) || strings.Contains(cmds, `\-\-`+strings.ReplaceAll(f, "-", `\-`)) && f != "name" {
			t.Errorf("--%s should be under OPTIONS only", f)
		}
	}
	for _, f := range []string{"json", "interval", "once", "ran\\-within", "limit"} {
		if strings.Contains(opts, `\-\-`+f+`\fR`) {
			t.Errorf("--%s is under OPTIONS, but running a command does not take it", f)
		}
	}
	if env := section("ENVIRONMENT"); !strings.Contains(env, ".B NO_COLOR\n") || !strings.Contains(env, "dumb") {
		t.Errorf("ENVIRONMENT does not say when colours are used (NO_COLOR, TERM=dumb)")
	}
	if see := section("SEE ALSO"); !strings.Contains(see, "docs/usage.md") {
		t.Errorf("SEE ALSO does not name the documents:\n%s", see)
	}

	m := needTool(t, "man", "man-db")
	c := exec.Command(m, "-l", filepath.Join(dir, "leaderrun.1"))
	c.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=80", "MAN_KEEP_FORMATTING=")
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil || stderr.Len() != 0 {
		t.Fatalf("man -l leaderrun.1: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(string(out), "leaderrun [OPTIONS] -- COMMAND [ARGS...]") || !strings.Contains(string(out), "leaderrun check --ran-within DURATION [OPTIONS] NAME") {
		t.Errorf("the rendered SYNOPSIS:\n%s", out)
	}
}

// TestManNamesEveryScheme: the man page names every scheme of the store
// table, as SCHEME:// (from --store's usage), and bash completes each after
// --store (e2e's TestDocsNameEveryScheme checks --help and the docs).
func TestManNamesEveryScheme(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir, cmd.DocApp(), "0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	man, err := os.ReadFile(filepath.Join(dir, "leaderrun.1"))
	if err != nil {
		t.Fatal(err)
	}
	bash, err := os.ReadFile(filepath.Join(dir, "leaderrun.bash"))
	if err != nil {
		t.Fatal(err)
	}
	// roff writes '-' as '\-'; a line break may fall only at a space.
	text := strings.ReplaceAll(string(man), `\-`, "-")
	completions := regexp.MustCompile(`--store\) COMPREPLY=\(\$\(compgen -W '([^']*)'`).FindStringSubmatch(string(bash))
	if completions == nil {
		t.Fatal("leaderrun.bash offers no values after --store")
	}
	for _, s := range storetab.Schemes() {
		if !regexp.MustCompile(`(^|[^a-z0-9+.-])` + regexp.QuoteMeta(s) + `://`).MatchString(text) {
			t.Errorf("leaderrun.1 does not name %s://", s)
		}
		if !slices.Contains(strings.Fields(completions[1]), s+"://") {
			t.Errorf("leaderrun.bash does not complete --store %s://", s)
		}
	}
}

// needTool returns the path of the program prog, failing the test without
// it with the line that installs it: the Debian package pkg, which
// scripts/test.sh installs.
func needTool(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s not found: install it with `apt-get install --no-install-recommends %s` (scripts/test.sh does)", prog, pkg)
	}
	return p
}
