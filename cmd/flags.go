package cmd

import (
	"slices"
	"strings"
)

// This file is the one pass leaderrun makes over the arguments before
// urfave/cli v2 parses them, for what urfave cannot do (urfave still parses
// every flag, runs the commands and writes help):
//
//   - Flags anywhere. urfave stops at the first positional argument and
//     gives a flag written before a subcommand to the app, not to the
//     subcommand. preparse moves a subcommand's flags (before or after it,
//     before or after NAME) behind it, so a flag means the same wherever it
//     is written.
//   - One-line refusals that help. urfave's "flag provided but not defined"
//     comes with the whole help, and its suggester names some flag however
//     far. preparse refuses an unknown flag (suggest.go), a flag of another
//     form, and a bad value (values.go) in one line.
//   - One parsed result, cmdLine, that the log format of an early error and
//     the dispatch to a store program read, rather than the arguments again.
//
// The flags' variables are read after urfave, from Main's environment
// (flagenv.go).

// given is one flag as written on the command line.
type given struct {
	info  flagInfo
	token string // the flag's name as written (-n, --no-wait), for messages
	value string
	has   bool
}

// cmdLine is the command line after preparse: what urfave parses, and what
// the steps before urfave read instead of the arguments.
type cmdLine struct {
	args    []string // for urfave, without the program name
	command []string // the run form's COMMAND [ARGS...]
	flags   []given  // every flag written, in order, also those past an error
	help    bool     // the help command
	err     error    // the first thing wrong; then args is not for urfave
}

// preparse reads args (the command line without the program name and
// without "--" and what follows it; hasDash says "--" followed, after which
// dashed is the command) against scopes (the run form first), and writes
// the flags for urfave: each as --name=value, a subcommand's right after it.
func preparse(args []string, hasDash bool, dashed []string, scopes []scope) cmdLine {
	r := reader{scopes: scopes, union: scope{flags: map[string]flagInfo{}}, form: scopes[0]}
	for _, s := range scopes {
		for n, f := range s.flags {
			r.union.flags[n] = f
		}
	}
	r.within = r.union
	var p cmdLine
	var names []string
	var stray error // a word before "--" in the run form: what follows is only looked at
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case isFlag(a):
			gs, j, err := r.next(args, i)
			if p.err == nil && stray == nil {
				p.err = err
			}
			p.flags, i = append(p.flags, gs...), j-1
		case r.form.name != "":
			names = append(names, a) // NAME, wherever it is
		case stray != nil:
		case a == "help":
			p.help, names, i = true, args[i+1:], len(args)
		case subcommand(a) != nil:
			r.form = r.scope(a)
			r.within = r.form
		case hasDash:
			stray = usagef("unexpected %q before --; put flags before -- and the command after it", a)
		default:
			p.command, i = args[i:], len(args) // the run form's COMMAND
		}
	}
	if p.err == nil {
		p.err = r.finish(&p, names, hasDash, dashed, stray)
	}
	return p
}

// reader holds what preparse's steps share.
type reader struct {
	scopes []scope
	union  scope // every form's flags
	form   scope // the form chosen so far
	within scope // the flags the next one may be: any before a subcommand
}

func (r reader) scope(name string) scope {
	for _, s := range r.scopes {
		if s.name == name {
			return s
		}
	}
	return r.scopes[0]
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

// next reads the flag at args[i] and returns it with the index after the
// flag and its value; on an error it still returns what it could read, for
// the log format. Short boolean flags combine, as with getopt: -nq.
func (r reader) next(args []string, i int) ([]given, int, error) {
	a := args[i]
	name, value, has := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
	info, ok := r.union.flags[name]
	if !ok && !has && a[1] != '-' && len(name) > 1 {
		var gs []given
		for _, c := range name {
			if f, ok := r.union.flags[string(c)]; ok && f.kind == kindBool { // finish says whose a flag of another form is
				gs = append(gs, given{info: f, token: "-" + string(c)})
			}
		}
		if len(gs) == len(name) {
			return gs, i + 1, nil
		}
	}
	if !ok {
		token, _, _ := strings.Cut(a, "=") // only the name: the value may be a password
		return nil, i + 1, unknownFlag(token, name, r.within, r.scopes)
	}
	g := given{info: info, token: dashes(name), value: value, has: has}
	if info.kind != kindBool && !has {
		if i+1 >= len(args) {
			return []given{g}, i + 1, usagef("%s needs a value", g.token)
		}
		i++
		g.value, g.has = args[i], true
	}
	if _, ok := r.within.flags[name]; !ok {
		return []given{g}, i + 1, unknownFlag(g.token, name, r.within, r.scopes)
	}
	return []given{g}, i + 1, nil
}

// finish checks the flags against the form chosen and writes p.args: the
// help command's words follow its flags, a subcommand's flags follow it and
// NAME follows "--"; the run form's command is the first word or dashed.
func (r reader) finish(p *cmdLine, names []string, hasDash bool, dashed []string, stray error) error {
	flags, help, err := r.norm(p.flags)
	switch {
	case err != nil:
		return err
	case p.help:
		p.args = slices.Concat(flags, []string{"help"}, names)
	case r.form.name == "":
		if stray != nil {
			return stray
		}
		p.args = flags
		if p.command == nil {
			p.command = dashed
		}
	case hasDash:
		return usagef("%s takes a lease NAME, not a command after --", r.form.name)
	default:
		p.args = append([]string{r.form.name}, flags...)
		if len(names) > 0 && !help { // urfave would take NAME for a help topic
			p.args = append(append(p.args, "--"), names...)
		}
	}
	return nil
}

// norm checks that the form takes each of gs and that its value is valid,
// and writes them as urfave parses them; help says --help is among them.
func (r reader) norm(gs []given) (out []string, help bool, err error) {
	for _, g := range gs {
		if _, ok := r.form.flags[g.info.name]; !ok {
			return nil, false, usagef("%s does not take %s; it is a flag of %s", r.form.describe(), g.token, ownerOf(g.info.name, r.scopes))
		}
		v, err := checkValue(g.info, g.token+" "+shellQuote(g.value), g.value, g.has)
		if err != nil {
			return nil, false, err
		}
		if g.has || g.info.kind != kindBool {
			out = append(out, "--"+g.info.name+"="+v)
		} else {
			out = append(out, "--"+g.info.name)
		}
		help = help || g.info.name == "help" && v == "true"
	}
	return out, help, nil
}

// logFormat is the log format of an error found before urfave read the
// flags: the last --log-format written, else LEADERRUN_LOG_FORMAT, else
// text. The flag beats the variable even when it is invalid: then the
// format cannot be told, and the line is text.
func (p cmdLine) logFormat(getenv func(string) string) string {
	v := strings.TrimSpace(getenv(envOf("log-format")))
	for _, g := range p.flags {
		if g.info.name == "log-format" {
			v = g.value
		}
	}
	if v == "json" || v == "text" {
		return v
	}
	return "text"
}

// dispatchable returns the --store URL of a command line that runs, waits
// or watches (not help or --version, which this program answers), from the
// flag or LEADERRUN_STORE.
func (p cmdLine) dispatchable(getenv func(string) string) (string, bool) {
	raw, set := "", false
	for _, g := range p.flags {
		switch g.info.name {
		case "help", "version":
			return "", false
		case "store":
			raw, set = g.value, true
		}
	}
	if p.help {
		return "", false
	}
	if !set {
		raw = getenv(envOf("store"))
	}
	return raw, raw != ""
}
