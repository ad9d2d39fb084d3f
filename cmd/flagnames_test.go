package cmd

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// Each wrapped flag answers as its flag does: the same names, and the same
// optional interfaces urfave looks for (help, environment, categories,
// required, actions); urfave's own flags stay themselves.
func TestWithNamesIsTheFlag(t *testing.T) {
	for i, flags := range formFlags(takeEnv) { // unwrapped
		wrapped := withNames(slices.Concat(flags, []cli.Flag{cli.HelpFlag, cli.VersionFlag}))
		if n := len(wrapped); wrapped[n-2] != cli.HelpFlag || wrapped[n-1] != cli.VersionFlag {
			t.Errorf("form %d: urfave's help or version flag was wrapped", i)
		}
		for j, f := range flags {
			w := wrapped[j]
			if w == f {
				continue // a kind withNames does not wrap: slower, not wrong
			}
			if unwrapNames(w) != f || kindOf(w) != kindOf(f) || envVars(w) != envVars(f) {
				t.Errorf("flag %v: unwrapped %v, kind %v (want %v)", f.Names(), unwrapNames(w), kindOf(w), kindOf(f))
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

// flagNames gives what cli.FlagNames gives, for plain names and for the
// v1-style ones it hands to urfave.
func TestFlagNamesIsUrfaves(t *testing.T) {
	for _, c := range []struct {
		name    string
		aliases []string
	}{
		{"wait", nil}, {"no-wait", []string{"n"}}, {"a", []string{"b", "c"}},
		{"store, s", nil}, {"x", []string{"y z"}}, {"p,q", []string{"r"}}, {"", nil},
	} {
		if got, want := flagNames(c.name, c.aliases), cli.FlagNames(c.name, c.aliases); !slices.Equal(got, want) {
			t.Errorf("flagNames(%q, %q) = %q, want %q", c.name, c.aliases, got, want)
		}
	}
}
