// Package rowtest holds a store's row of the store table (storetab) to the
// store's own code. Each store package's row_test.go calls Check with what
// its code says, so that a row cannot say what the store does not do. It
// needs no server: a store's Limits, CandidateTiming and capabilities are
// read from a store value that reaches nothing.
package rowtest

import (
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/storetab"
)

// Facts are what a store's code says of the store.
type Facts struct {
	// Schemes is the store package's list of its schemes (its Schemes);
	// nil for a store whose URL another package reads (the file store's:
	// cmd's tests hold its row's schemes to cmd's parser).
	Schemes []string
	// Accepts runs the store's URL parser on a URL of scheme; nil means
	// the parser accepts the scheme. It is asked about every scheme of the
	// table and must accept exactly the row's. Nil when Schemes is.
	Accepts func(scheme string) error
	// Store is a store of the package whose Limits, CandidateTiming and
	// capabilities are the store's defaults; it need reach no server.
	Store lease.Store
	// Poll is the package's default interval between a waiter's looks at a
	// held lease; zero when the store wakes its waiters.
	Poll time.Duration
	// SecretVars are the package's names of the environment variables it
	// reads a credential from, in the row's order.
	SecretVars []string
}

// Check fails t where the row named name (storetab.Row.Name) says other
// than f, or the row's program does not link the store's package.
func Check(t *testing.T, name string, f Facts) {
	t.Helper()
	r, ok := storetab.ByName(name)
	if !ok {
		t.Fatalf("the store table has no row named %q", name)
	}
	if f.Schemes != nil {
		checkSchemes(t, r, f)
	}
	lim := f.Store.Limits()
	if lim.Expires != r.Expires || lim.MinTTL != r.MinTTL || lim.MaxTTL != r.MaxTTL || lim.TTLUnit != r.TTLUnit {
		t.Errorf("row %s: Expires %v, TTL %v to %v in units of %v; the store's Limits say %v, %v to %v in units of %v",
			name, r.Expires, r.MinTTL, r.MaxTTL, r.TTLUnit, lim.Expires, lim.MinTTL, lim.MaxTTL, lim.TTLUnit)
	}
	if _, watches := f.Store.(lease.ChangeWatcher); watches != r.Watches {
		t.Errorf("row %s: Watches %v; the store is a lease.ChangeWatcher: %v", name, r.Watches, watches)
	}
	if reg, ok := f.Store.(lease.CandidateRegistry); !ok {
		t.Errorf("row %s: the store keeps no standbys (lease.CandidateRegistry)", name)
	} else if step := reg.CandidateTiming().Step; step != r.Step {
		t.Errorf("row %s: Step %v; the store's δ is %v", name, r.Step, step)
	}
	if f.Poll != r.Poll {
		t.Errorf("row %s: Poll %v; the store's default poll is %v", name, r.Poll, f.Poll)
	}
	if !slices.Equal(r.SecretVars, f.SecretVars) {
		t.Errorf("row %s: SecretVars %q; the store reads credentials from %q", name, r.SecretVars, f.SecretVars)
	}
	if pkg := reflect.TypeOf(f.Store).Elem().PkgPath(); pkg != r.Package {
		t.Errorf("row %s: Package %s; the store is of %s", name, r.Package, pkg)
	}
	checkProgram(t, r)
}

// checkSchemes fails t unless the package's schemes are r's and its URL
// parser accepts exactly them, of all the table's schemes.
func checkSchemes(t *testing.T, r storetab.Row, f Facts) {
	t.Helper()
	if !slices.Equal(r.Schemes, f.Schemes) {
		t.Errorf("row %s: schemes %q; the package's are %q", r.Name, r.Schemes, f.Schemes)
	}
	for _, s := range storetab.Schemes() {
		err := f.Accepts(s)
		if mine := slices.Contains(r.Schemes, s); mine != (err == nil) {
			t.Errorf("row %s: scheme %s is the row's: %v; the store's URL parser accepts it: %v (%v)", r.Name, s, mine, err == nil, err)
		}
	}
	if err := f.Accepts("nosuch"); err == nil {
		t.Errorf("row %s: the URL parser accepts the scheme nosuch", r.Name)
	}
}

// checkProgram fails t unless r's program is a main package, in the
// repository, that calls cmd.Main linking r's package (the file store's,
// leaderrun itself, links it through cmd).
func checkProgram(t *testing.T, r storetab.Row) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(root, "cmd", r.Program, "main.go")
	if r.Linked() {
		main = filepath.Join(root, "main.go")
	}
	f, err := parser.ParseFile(token.NewFileSet(), main, nil, parser.ImportsOnly)
	if err != nil {
		t.Errorf("row %s: program %s: %v", r.Name, r.Program, err)
		return
	}
	var imports []string
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		imports = append(imports, p)
	}
	want := []string{"github.com/leaderrun/leaderrun/cmd"}
	if !r.Linked() {
		want = append(want, r.Package)
	}
	for _, w := range want {
		if f.Name.Name != "main" || !slices.Contains(imports, w) {
			t.Errorf("row %s: %s is not a main package importing %s", r.Name, main, w)
		}
	}
}

// repoRoot finds the module's root above the working directory (a
// package's test runs in its directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/leaderrun/leaderrun\n") {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("rowtest: no go.mod of github.com/leaderrun/leaderrun above the working directory")
		}
		dir = up
	}
}
