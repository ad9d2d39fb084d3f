package cmd

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/cliflags"
	"github.com/urfave/cli/v2"
)

// The flags' variables. urfave reads a flag's EnvVars from the process
// environment itself, before the command line, and with strconv.ParseBool
// and time.ParseDuration's messages. takeEnv hides the EnvVars from it;
// applyEnv reads them from Main's environment after the command line, so
// that a flag on the command line always wins, also over the variable of a
// related flag (--wait beats LEADERRUN_NO_WAIT), and refuses related flags
// that contradict each other at the same level (-n --wait 2s, -q -v). Help
// still shows each flag's variable (flagString).

// envVars returns a pointer to f's EnvVars, or nil for a flag type without.
func envVars(f cli.Flag) *[]string {
	switch f := cliflags.Unwrap(f).(type) {
	case *cli.BoolFlag:
		return &f.EnvVars
	case *cli.StringFlag:
		return &f.EnvVars
	case *cli.DurationFlag:
		return &f.EnvVars
	case *cli.IntFlag:
		return &f.EnvVars
	case *cli.StringSliceFlag:
		return &f.EnvVars // the variable's value is comma-separated, as urfave's
	}
	return nil
}

// varsOf maps the name of each of flags to the first of its EnvVars.
func varsOf(flags []cli.Flag) map[string]string {
	m := map[string]string{}
	for _, f := range flags {
		if v := envVars(f); v != nil && len(*v) > 0 {
			m[cliflags.Names(f)[0]] = (*v)[0]
		}
	}
	return m
}

// takeEnv clears the EnvVars of flags, so that urfave does not read the
// process environment; applyEnv reads the variables (flagVars) instead.
func takeEnv(flags []cli.Flag) []cli.Flag {
	for _, f := range flags {
		if v := envVars(f); v != nil {
			*v = nil
		}
	}
	return flags
}

// envOf returns the variable of the flag called name, or "".
func envOf(name string) string { return flagVars()[name] }

// relatedFlags are flags that say the same thing: a command-line flag of a
// group silences the variables of the whole group.
var relatedFlags = [][]string{{"wait", "no-wait"}, {"quiet", "verbose"}}

// setFlags reports, by the first name of each of flags (c's own), whether
// it was set (on the command line, under any of its names): c.IsSet for
// each, in one pass (c.IsSet looks each name up through every flag's names,
// which urfave/cli computes with a regular expression each time).
func setFlags(c *cli.Context, flags []cli.Flag) map[string]bool {
	visited := map[string]bool{}
	for _, n := range c.LocalFlagNames() {
		visited[n] = true
	}
	set := make(map[string]bool, len(flags))
	for _, f := range flags {
		names := f.Names()
		set[names[0]] = f.IsSet() || slices.ContainsFunc(names, func(n string) bool { return visited[n] })
	}
	return set
}

// applyEnv sets each of flags that was not given on the command line from
// its variable, records in o which flags were given either way, then
// refuses contradictions within a group of related flags.
func applyEnv(c *cli.Context, o *options, flags []cli.Flag, lookupEnv func(string) (string, bool)) error {
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	onLine := setFlags(c, flags)
	silenced := func(name string) bool {
		for _, g := range relatedFlags {
			if slices.Contains(g, name) {
				for _, other := range g {
					if onLine[other] {
						return true
					}
				}
			}
		}
		return onLine[name]
	}
	fromEnv := map[string]bool{}
	for _, f := range flags {
		name := f.Names()[0]
		env := envOf(name)
		if env == "" || silenced(name) {
			continue
		}
		raw, set := lookupEnv(env)
		if strings.TrimSpace(raw) == "" {
			if set && name == "store" {
				// The usual cause is a CI secret or a settings file that
				// came out empty: the file store would let every host run.
				return usagef("%s is set but empty: that would mean this host's file store, which excludes no other host; set it to the store's URL, or unset it for the file store", env)
			}
			continue // an empty variable is an unset one
		}
		what := env + "=" + shellQuote(raw) + " (" + dashes(name) + ")"
		if kindOf(f) == kindString {
			what = env + " (" + dashes(name) + ")" // may hold a password (LEADERRUN_STORE)
		}
		v, err := checkValue(flagInfo{name: name, kind: kindOf(f)}, what, raw, true)
		if err != nil {
			return err
		}
		if err := c.Set(name, v); err != nil {
			return usagef("%s: %v", what, err)
		}
		fromEnv[name] = true
	}
	o.given, o.fromVar = map[any]bool{}, map[string]string{}
	for _, f := range flags {
		name := f.Names()[0]
		if onLine[name] || fromEnv[name] {
			o.given[destOf(f)] = true
		}
		if fromEnv[name] {
			o.fromVar[name] = envOf(name)
		}
	}
	return contradictions(o, onLine, fromEnv, getenv)
}

// destOf returns the field of options that f is bound to (Destination).
func destOf(f cli.Flag) any {
	switch f := cliflags.Unwrap(f).(type) {
	case *cli.BoolFlag:
		return f.Destination
	case *cli.StringFlag:
		return f.Destination
	case *cli.DurationFlag:
		return f.Destination
	case *cli.IntFlag:
		return f.Destination
	case *cli.StringSliceFlag:
		return f.Destination
	}
	return nil
}

// contradictions refuses related flags that contradict each other at one
// level: both on the command line (onLine), or both from variables
// (fromEnv).
func contradictions(o *options, onLine, fromEnv map[string]bool, getenv func(string) string) error {
	spell := func(name, value string) string { // value "": a boolean flag
		switch {
		case fromEnv[name]:
			return envOf(name) + "=" + shellQuote(getenv(envOf(name)))
		case value == "":
			return dashes(name)
		default:
			return dashes(name) + " " + shellQuote(value)
		}
	}
	has := func(name string) bool { return onLine[name] || fromEnv[name] }
	if has("no-wait") && has("wait") && o.noWait && waitNonZero(o.wait) {
		return usagef("%s and %s contradict each other; give one of them", spell("no-wait", ""), spell("wait", o.wait))
	}
	if has("quiet") && has("verbose") && o.quiet && o.verbose {
		return usagef("%s and %s contradict each other; give one of them", spell("quiet", ""), spell("verbose", ""))
	}
	return nil
}

// waitNonZero reports whether a --wait value asks to wait at all.
func waitNonZero(s string) bool {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	return err != nil || d != 0 // forever, or a duration
}

// flagString is cli.FlagStringer with the variable that takeEnv moved out
// of EnvVars shown again.
func flagString(base cli.FlagStringFunc) cli.FlagStringFunc {
	return func(f cli.Flag) string {
		f = cliflags.Unwrap(f) // urfave's own stringer looks at the type too
		s := base(f)
		if _, ok := f.(*cli.StringSliceFlag); ok {
			// "--pass-env VAR [ --pass-env VAR ]" would widen every row;
			// the usage says the flag is repeatable.
			if i := strings.Index(s, " [ --"); i >= 0 {
				if j := strings.Index(s[i:], " ]"); j >= 0 {
					s = s[:i] + s[i+j+2:]
				}
			}
		}
		if env := envOf(f.Names()[0]); env != "" {
			if df, ok := f.(cli.DocGenerationFlag); ok && len(df.GetEnvVars()) == 0 {
				s += fmt.Sprintf(" [$%s]", env)
			}
		}
		return s
	}
}

// takeEnvNamed is takeEnv, with the flags' names computed once
// (cliflags.WithNames): the flags a run hands preparse, applyEnv and urfave.
func takeEnvNamed(flags []cli.Flag) []cli.Flag { return cliflags.WithNames(takeEnv(flags)) }
