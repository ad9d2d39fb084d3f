package cmd

import (
	"slices"
	"testing"

	"github.com/leaderrun/leaderrun/internal/cliflags"
	"github.com/urfave/cli/v2"
)

// Each wrapped flag answers as its flag does: the same names, and the same
// optional interfaces urfave looks for (help, environment, categories,
// required, actions); urfave's own flags stay themselves.
func TestWithNamesIsTheFlag(t *testing.T) {
	for i, flags := range formFlags(&options{}, takeEnv) { // unwrapped
		wrapped := cliflags.WithNames(slices.Concat(flags, []cli.Flag{cli.HelpFlag, cli.VersionFlag}))
		if n := len(wrapped); wrapped[n-2] != cli.HelpFlag || wrapped[n-1] != cli.VersionFlag {
			t.Errorf("form %d: urfave's help or version flag was wrapped", i)
		}
		for j, f := range flags {
			w := wrapped[j]
			if w == f {
				continue // a kind withNames does not wrap: slower, not wrong
			}
			if cliflags.Unwrap(w) != f || kindOf(w) != kindOf(f) || envVars(w) != envVars(f) {
				t.Errorf("flag %v: unwrapped %v, kind %v (want %v)", f.Names(), cliflags.Unwrap(w), kindOf(w), kindOf(f))
			}
			if !slices.Equal(w.Names(), f.Names()) {
				t.Errorf("flag %v: wrapped names %v", f.Names(), w.Names())
			}
			for name, has := range map[string]func(cli.Flag) bool{
				"DocGenerationFlag": func(f cli.Flag) bool { _, ok := f.(cli.DocGenerationFlag); return ok },
				"VisibleFlag":       func(f cli.Flag) bool { _, ok := f.(cli.VisibleFlag); return ok },
				"CategorizableFlag": func(f cli.Flag) bool { _, ok := f.(cli.CategorizableFlag); return ok },
				"RequiredFlag":      func(f cli.Flag) bool { _, ok := f.(cli.RequiredFlag); return ok },
				"ActionableFlag":    func(f cli.Flag) bool { _, ok := f.(cli.ActionableFlag); return ok },
			} {
				if has(f) != has(w) {
					t.Errorf("flag %v: %s %v, wrapped %v", f.Names(), name, has(f), has(w))
				}
			}
			if w.String() != f.String() {
				t.Errorf("flag %v: wrapped help %q, want %q", f.Names(), w.String(), f.String())
			}
		}
	}
}
