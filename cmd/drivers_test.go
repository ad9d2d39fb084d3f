package cmd

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease/bloblease"
	"github.com/leaderrun/leaderrun/lease/pglease"
	"github.com/leaderrun/leaderrun/lease/redislease"
)

// TestDrivers: every scheme of a store package is dispatched to the program
// that links it, and that program exists as cmd/<name>/main.go importing
// the store package; no scheme is dispatched that no store serves.
func TestDrivers(t *testing.T) {
	served := map[string]string{}
	for prog, schemes := range map[string][]string{
		"leaderrun-redis":    redislease.Schemes,
		"leaderrun-azblob":   bloblease.Schemes(),
		"leaderrun-postgres": pglease.Schemes,
	} {
		for _, s := range schemes {
			served[s] = prog
			if drivers[s] != prog {
				t.Errorf("scheme %s: dispatched to %q; want %q", s, drivers[s], prog)
			}
		}
	}
	for s, prog := range drivers {
		if served[s] != prog {
			t.Errorf("drivers[%q] = %q, but no store of that program serves it", s, prog)
		}
	}
	progs := map[string]bool{}
	for _, p := range drivers {
		progs[p] = true
	}
	for prog := range progs {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(prog, "main.go"), nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", prog, err)
			continue
		}
		var imports []string
		for _, im := range f.Imports {
			imports = append(imports, strings.Trim(im.Path.Value, `"`))
		}
		if !slices.Contains(imports, "github.com/leaderrun/leaderrun/cmd") || f.Name.Name != "main" {
			t.Errorf("cmd/%s/main.go is not a main package calling cmd.Main", prog)
		}
	}
}
