package cmd

import (
	"github.com/urfave/cli/v2"
)

// urfave/cli computes a flag's names (Names) with a regular expression on
// every call, and finds a flag by name by asking every flag for its names:
// Context.IsSet does, and after parsing runFlagActions asks IsSet of every
// flag, so a run paid a quadratic number of regular-expression
// replacements (6 % of the CPU of a file run of `-- true`, page faults
// included). The app a run hands urfave gets its flags wrapped with their
// names computed once; each wrapper is its flag otherwise (its methods are
// the flag's). The flags urfave adds itself (help, version) are left as
// they are: urfave recognises them by identity. DocApp's flags are not
// wrapped: the man page and completions look at the flags' types.

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

// withNames returns flags with each of the kinds leaderrun defines wrapped
// so that its names are computed once (urfave's own flags, and any other
// kind, as they are).
func withNames(flags []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(flags))
	for i, f := range flags {
		out[i] = f
		if f == cli.HelpFlag || f == cli.VersionFlag {
			continue
		}
		switch f := f.(type) {
		case *cli.BoolFlag:
			out[i] = &boolNames{f, f.Names()}
		case *cli.StringFlag:
			out[i] = &stringNames{f, f.Names()}
		case *cli.DurationFlag:
			out[i] = &durationNames{f, f.Names()}
		case *cli.IntFlag:
			out[i] = &intNames{f, f.Names()}
		case *cli.StringSliceFlag:
			out[i] = &sliceNames{f, f.Names()}
		}
	}
	return out
}

// namesComputedOnce wraps the flags of app and of its commands (withNames)
// and returns app.
func namesComputedOnce(app *cli.App) *cli.App {
	app.Flags = withNames(app.Flags)
	for _, c := range app.Commands {
		c.Flags = withNames(c.Flags)
	}
	return app
}
