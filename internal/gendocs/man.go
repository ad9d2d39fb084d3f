package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// roff escapes text for a man page: backslashes, hyphens (so that
// --store is not hyphenated or turned into a dash) and a leading dot or
// quote, which roff would take for a request.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffText renders a help text: paragraphs at blank lines, indented lines
// (output samples, examples) as they are, the rest filled.
func roffText(b *strings.Builder, text string) {
	pre := false
	for _, l := range strings.Split(text, "\n") {
		indented := strings.HasPrefix(l, "   ")
		switch {
		case strings.TrimSpace(l) == "":
			if pre {
				b.WriteString(".fi\n.RE\n")
				pre = false
			}
			b.WriteString(".PP\n")
			continue
		case indented && !pre:
			b.WriteString(".RS 4\n.nf\n")
			pre = true
		case !indented && pre:
			b.WriteString(".fi\n.RE\n")
			pre = false
		}
		if pre {
			b.WriteString(roff(strings.TrimPrefix(l, "   ")) + "\n")
			continue
		}
		// A break point after each comma, so that a long JSON shape can wrap.
		b.WriteString(strings.ReplaceAll(roff(l), ",", `,\:`) + "\n")
	}
	if pre {
		b.WriteString(".fi\n.RE\n")
	}
}

// flagDefault is a flag's default as the reader should see it: the
// documented default text, or its value, without quotes; "" when it has none
// worth saying (booleans, empty values).
func flagDefault(f cli.DocGenerationFlag) string {
	if bf, ok := f.(*cli.BoolFlag); ok && bf.DisableDefaultText {
		return ""
	}
	d := strings.Trim(f.GetDefaultText(), `"`)
	if d == "" || d == "[]" {
		return ""
	}
	return d
}

// roffFlag writes one flag as a tagged paragraph: its names with the
// value's placeholder, the help text, the default and the variable.
func roffFlag(b *strings.Builder, f cli.Flag) {
	d, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return
	}
	placeholder, usage := unquoteUsage(d.GetUsage())
	if d.TakesValue() && placeholder == "" {
		placeholder = "VALUE"
	}
	var names []string
	for _, n := range flagNames(f) {
		s := `\fB` + roff(dashed(n)) + `\fR`
		if d.TakesValue() {
			s += ` \fI` + roff(placeholder) + `\fR`
		}
		names = append(names, s)
	}
	b.WriteString(".TP\n" + strings.Join(names, ", ") + "\n" + roff(usage))
	if def := flagDefault(d); def != "" {
		b.WriteString(". Default: " + roff(def))
	}
	if vs := d.GetEnvVars(); len(vs) > 0 {
		b.WriteString(". Variable: \\fB" + roff(strings.Join(vs, ", ")) + "\\fR")
	}
	b.WriteString(".\n")
}

// unquoteUsage returns the placeholder a help text names in backquotes
// (urfave's convention: "lease `NAME`") and the text without them.
func unquoteUsage(usage string) (string, string) {
	_, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, _, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, strings.Replace(strings.Replace(usage, "`", "", 1), "`", "", 1)
}

// flagNames are a flag's names, long ones first.
func flagNames(f cli.Flag) []string {
	names := slices.Clone(f.Names())
	slices.SortStableFunc(names, func(a, b string) int { return len(b) - len(a) })
	return names
}

// synopsisLine renders one form of the command line, such as
// "leaderrun status [flags] NAME": the program and subcommand bold, the
// rest as written (with [OPTIONS] for [flags]) and the words in capitals as
// placeholders.
func synopsisLine(form string) string {
	var out []string
	for i, w := range strings.Fields(strings.ReplaceAll(form, "[flags]", "[OPTIONS]")) {
		switch {
		case i == 0 || i == 1 && w == strings.ToLower(w) && !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "["):
			out = append(out, `\fB`+roff(w)+`\fR`)
		case strings.HasPrefix(w, "--"):
			out = append(out, `\fB`+roff(w)+`\fR`)
		default:
			// [OPTIONS], COMMAND, [ARGS...], NAME, DURATION: brackets and
			// dots upright, the capitals in italics.
			core := strings.Trim(w, "[].")
			out = append(out, strings.Replace(roff(w), roff(core), `\fI`+roff(core)+`\fR`, 1))
		}
	}
	return strings.Join(out, " ")
}

// exitStatus is the man page's EXIT STATUS section: every code leaderrun
// and its subcommands return.
var exitStatus = [][2]string{
	{"the child's 0\\(en255", "the child exited by itself; its code is passed through unchanged (also 2 and 3, which mean something else only for check and status)"},
	{"128+N", "the child was killed by signal N; also leaderrun itself interrupted by signal N (INT, TERM, HUP, QUIT) while it waited, before any child started"},
	{"75", "the lease is held by another and \\-\\-wait ran out (\\-\\-conflict\\-exit\\-code changes it)"},
	{"0 (\\-\\-once\\-per)", "the period was found done: a run that started in it succeeded (with \\-\\-once\\-per\\-any: ended); no child was started (\\-\\-once\\-per\\-exit\\-code changes it)"},
	{"123", "the \\-\\-health\\-cmd check failed \\-\\-health\\-retries times in a row while leading: leaderrun stopped the child and released the lease"},
	{"124", "leadership was lost while the child ran (or was not held for its whole run), or the guard process died; leaderrun stopped the child if it still ran"},
	{"125", "leaderrun itself failed: usage, bad configuration, the store unreachable, credentials refused; no child was started"},
	{"126", "COMMAND is not executable"},
	{"127", "COMMAND was not found"},
	{"0 (status)", "the lease is held (also during a \\-\\-hold\\-at\\-least hold)"},
	{"3 (status)", "the lease is free"},
	{"4 (status)", "nothing is known of the lease: no holder, no standby, no recorded run"},
	{"0 (check)", "a run (with \\-\\-succeeded: a successful one) started within \\-\\-ran\\-within"},
	{"2 (check)", "none did"},
	{"0 (watch, history)", "watch ended by INT or TERM (or, with \\-\\-once, after the change); history printed the runs"},
}

// man renders leaderrun's man page from app.
func man(app *cli.App, version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH LEADERRUN 1 \"\" \"leaderrun %s\" \"User Commands\"\n.nh\n.ad l\n", roff(version))
	b.WriteString(".SH NAME\nleaderrun \\- " + roff(app.Usage) + "\n")

	b.WriteString(".SH SYNOPSIS\n")
	for i, form := range strings.Split(strings.TrimSpace(app.UsageText), "\n") {
		if i > 0 {
			b.WriteString(".br\n")
		}
		b.WriteString(synopsisLine(form) + "\n")
	}

	desc, _, _ := strings.Cut(app.Description, "\nExit codes:")
	main, examples, hasExamples := strings.Cut(desc, "\nExamples:\n")
	b.WriteString(".SH DESCRIPTION\n")
	roffText(&b, strings.TrimSpace(main))
	b.WriteString(".PP\nThe documents under /usr/share/doc/leaderrun (docs/ in the source) explain every part in depth; SEE ALSO lists them.\n")

	run := map[string]bool{}
	b.WriteString(".SH OPTIONS\nThese options are for running a command (the first form); each subcommand's own are under COMMANDS. An option may also be set by its variable; one on the command line wins.\n")
	for _, f := range app.Flags {
		roffFlag(&b, f)
		run[f.Names()[0]] = true
	}

	b.WriteString(".SH COMMANDS\n")
	for _, c := range app.Commands {
		if c.Name == "help" {
			continue
		}
		b.WriteString(".SS " + roff(c.Name) + "\n" + synopsisLine(c.UsageText) + "\n.PP\n")
		roffText(&b, strings.TrimSpace(c.Description))
		var shared []string
		for _, f := range c.Flags {
			if run[f.Names()[0]] {
				shared = append(shared, `\fB`+roff(dashed(flagNames(f)[0]))+`\fR`)
				continue
			}
			roffFlag(&b, f)
		}
		if len(shared) > 0 {
			b.WriteString(".TP\n" + strings.Join(shared, ", ") + ", \\fB\\-\\-help\\fR\nas under OPTIONS.\n")
		}
	}
	b.WriteString(".SS help\n\\fBleaderrun help\\fR [\\fICOMMAND\\fR]\n.PP\nShows the help, or a command's; \\fBleaderrun \\-\\- help\\fR runs a program called help.\n")

	if hasExamples {
		b.WriteString(".SH EXAMPLES\n")
		roffText(&b, strings.TrimRight(examples, "\n"))
	}

	b.WriteString(".SH EXIT STATUS\nThe exit codes can collide with the child's own, so leaderrun always ends with one line on stderr that says which case happened (left out by \\-q when the child exited 0 or the lease was held).\n")
	for _, e := range exitStatus {
		b.WriteString(".TP\n.B " + e[0] + "\n" + e[1] + ".\n")
	}

	b.WriteString(manEnvironment(app))
	b.WriteString(`.TP
.B NO_COLOR
set to anything but the empty string: leaderrun's own lines on stderr are not coloured. Otherwise, and unless \fBTERM\fR is \fBdumb\fR, the "leaderrun:" prefix of its text lines is coloured when stderr is a terminal: cyan for information, yellow for warnings, red for errors. Nothing else is coloured: not status, watch, history or check output, not \-\-log\-format json, not a pipe or a file.
.TP
.B TERM
\fBdumb\fR turns colour off, as NO_COLOR does.
.TP
.B LEADERRUN_LEASE, LEADERRUN_LEASE_HOLDER, LEADERRUN_LEASE_TOKEN
given to COMMAND: the lease's name, this holder and the fencing token.
.SH FILES
.TP
.I ~/.local/state/leaderrun
the default file store (one host only).
.TP
.I /etc/default/leaderrun, /etc/default/leaderrun\-NAME
settings of the packaged template unit leaderrun@NAME.service.
.TP
.I /usr/share/doc/leaderrun
README.md and docs/: the full documentation.
.SH SEE ALSO
.BR systemd.service (5),
.BR systemd.exec (5),
.BR crontab (5),
.BR flock (1).
.PP
In /usr/share/doc/leaderrun (or the source's docs/):
README.md (overview, install, recipes),
docs/usage.md (commands, every flag, timing rules, output, colours),
docs/stores.md (store URLs, credentials, permissions),
docs/child.md (the child's environment and signals),
docs/systemd.md (units, the template unit, sandboxing),
docs/health.md, docs/standbys.md, docs/guard.md, docs/safety.md.
`)
	return b.String()
}
