// Package cliflags makes urfave/cli's flags cheaper to look up: their names
// computed once, not with a regular expression on every lookup.
package cliflags

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// urfave/cli computes a flag's names (Names) with a regular expression on
// every call, and finds a flag by name by asking every flag for its names:
// Context.IsSet does, and after parsing runFlagActions asks IsSet of every
// flag: a quadratic number of regular-expression replacements a run
// (docs/performance.md), and cmd's preparse and applyEnv asked again for
// each flag. A run's flags are wrapped with their names computed once
// (cmd's takeEnvNamed); each
// wrapper is its flag otherwise (its methods are the flag's; code that
// looks at a flag's type unwraps it first: Unwrap). The flags urfave
// adds itself (help, version) are left as they are: urfave recognises them
// by identity. DocApp's flags are not wrapped: the man page and
// completions look at the flags' types.

type (
	boolNames struct {
		*cli.BoolFlag
		names []string
	}
	stringNames struct {
		*cli.StringFlag
		names []string
	}
	durationNames struct {
		*cli.DurationFlag
		names []string
	}
	intNames struct {
		*cli.IntFlag
		names []string
	}
	sliceNames struct {
		*cli.StringSliceFlag
		names []string
	}
)

// Names returns the flag's names, computed once.
func (f *boolNames) Names() []string { return f.names }

// Names returns the flag's names, computed once.
func (f *stringNames) Names() []string { return f.names }

// Names returns the flag's names, computed once.
func (f *durationNames) Names() []string { return f.names }

// Names returns the flag's names, computed once.
func (f *intNames) Names() []string { return f.names }

// Names returns the flag's names, computed once.
func (f *sliceNames) Names() []string { return f.names }

// WithNames returns flags with each of the kinds leaderrun defines wrapped
// so that its names are computed once (urfave's own flags, and any other
// kind, as they are).
func WithNames(flags []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(flags))
	for i, f := range flags {
		out[i] = f
		if f == cli.HelpFlag || f == cli.VersionFlag {
			continue
		}
		switch f := f.(type) {
		case *cli.BoolFlag:
			out[i] = &boolNames{f, Names(f)}
		case *cli.StringFlag:
			out[i] = &stringNames{f, Names(f)}
		case *cli.DurationFlag:
			out[i] = &durationNames{f, Names(f)}
		case *cli.IntFlag:
			out[i] = &intNames{f, Names(f)}
		case *cli.StringSliceFlag:
			out[i] = &sliceNames{f, Names(f)}
		}
	}
	return out
}

// flagNames is cli.FlagNames without its regular expression for the names
// it leaves as they are: those without a comma or a space (all of
// leaderrun's). Others go to cli.FlagNames.
func flagNames(name string, aliases []string) []string {
	if strings.ContainsAny(name, ", ") || slices.ContainsFunc(aliases, func(a string) bool { return strings.ContainsAny(a, ", ") }) {
		return cli.FlagNames(name, aliases)
	}
	return append([]string{name}, aliases...)
}

// Names returns f.Names(), without urfave's regular expression for the
// kinds leaderrun defines (flagNames).
func Names(f cli.Flag) []string {
	switch f := f.(type) {
	case *cli.BoolFlag:
		return flagNames(f.Name, f.Aliases)
	case *cli.StringFlag:
		return flagNames(f.Name, f.Aliases)
	case *cli.DurationFlag:
		return flagNames(f.Name, f.Aliases)
	case *cli.IntFlag:
		return flagNames(f.Name, f.Aliases)
	case *cli.StringSliceFlag:
		return flagNames(f.Name, f.Aliases)
	}
	return f.Names()
}

// Unwrap returns the flag a WithNames wrapper wraps, or f itself.
func Unwrap(f cli.Flag) cli.Flag {
	switch f := f.(type) {
	case *boolNames:
		return f.BoolFlag
	case *stringNames:
		return f.StringFlag
	case *durationNames:
		return f.DurationFlag
	case *intNames:
		return f.IntFlag
	case *sliceNames:
		return f.StringSliceFlag
	}
	return f
}
