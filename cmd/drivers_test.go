package cmd

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease/storetab"
)

// TestDrivers: every scheme of the store table is served by this test
// binary, which links every store (stores_test.go), and by nothing else;
// each store program exists as a main package calling cmd.Main with its
// store's package (cmd/leaderrun-*/main.go; the file store's is leaderrun
// itself). Each store package's own test holds its row to its code
// (storetab/rowtest).
func TestDrivers(t *testing.T) {
	for _, s := range storetab.Schemes() {
		if _, ok := storeOpeners[s]; !ok {
			t.Errorf("scheme %s: no store of the table's is linked into cmd's tests (stores_test.go)", s)
		}
		r, _ := storetab.ByScheme(s)
		if prog, ok := driverOf(s); ok != !r.Linked() || ok && prog != r.Program {
			t.Errorf("scheme %s: dispatched to %q, %v; want %q", s, prog, ok, r.Program)
		}
	}
	for s := range storeOpeners {
		if _, ok := storetab.ByScheme(s); !ok && s != "memtest" { // safety_test.go's in-memory store
			t.Errorf("scheme %s is served, but the store table has no row for it", s)
		}
	}
	for _, r := range storetab.All() {
		main := filepath.Join(r.Program, "main.go")
		if r.Linked() {
			main = filepath.Join("..", "main.go")
		}
		f, err := parser.ParseFile(token.NewFileSet(), main, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", r.Program, err)
			continue
		}
		var imports []string
		for _, im := range f.Imports {
			imports = append(imports, strings.Trim(im.Path.Value, `"`))
		}
		if !slices.Contains(imports, "github.com/leaderrun/leaderrun/cmd") || f.Name.Name != "main" {
			t.Errorf("%s is not a main package calling cmd.Main", main)
		}
		if !r.Linked() && !slices.Contains(imports, r.Package) {
			t.Errorf("%s does not link %s, the %s store's package", main, r.Package, r.Name)
		}
	}
}

func TestDispatchable(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "LEADERRUN_STORE" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		args []string
		env  string
		want string
		ok   bool
	}{
		{[]string{"--store=redis://h:1"}, "", "redis://h:1", true},
		{[]string{"--store=redis://h:1", "--store=azblob://a/c"}, "", "azblob://a/c", true},
		{nil, "redis://e:1", "redis://e:1", true},
		{[]string{"--store=file:///x"}, "redis://e:1", "file:///x", true},
		{[]string{"status", "--store=redis://h:1"}, "", "redis://h:1", true},
		{[]string{"--store=redis://h:1", "--help"}, "", "", false},
		{[]string{"--version"}, "redis://e:1", "", false},
		{[]string{"help", "status"}, "redis://e:1", "", false},
		{nil, "", "", false},
	} {
		got, ok := preparse(c.args, false, nil, (&invocation{flags: formFlags(&options{}, takeEnv)}).scopes()).dispatchable(env(c.env))
		if got != c.want || ok != c.ok {
			t.Errorf("dispatchable(%q, LEADERRUN_STORE=%q) = %q, %v; want %q, %v", c.args, c.env, got, ok, c.want, c.ok)
		}
	}
}
