package storetab

import (
	"strings"
	"testing"
)

// TestRowsWellFormed: every scheme is lower case and served by one store;
// every row names its store, program and package, and a program other
// than leaderrun is leaderrun-SOMETHING.
func TestRowsWellFormed(t *testing.T) {
	seen := map[string]string{}
	for _, r := range All() {
		if r.Name == "" || r.Program == "" || r.Package == "" || r.Form == "" || len(r.Schemes) == 0 {
			t.Errorf("row %+v lacks a name, program, package, form or scheme", *r)
		}
		if !r.Linked() && !strings.HasPrefix(r.Program, "leaderrun-") {
			t.Errorf("row %s: program %s is not leaderrun-…", r.Name, r.Program)
		}
		if !strings.HasPrefix(r.Form, r.Schemes[0]+"://") {
			t.Errorf("row %s: form %s is not of its first scheme %s", r.Name, r.Form, r.Schemes[0])
		}
		for _, s := range r.Schemes {
			if s != strings.ToLower(s) {
				t.Errorf("row %s: scheme %s is not lower case", r.Name, s)
			}
			if other, dup := seen[s]; dup {
				t.Errorf("scheme %s is served by %s and %s", s, other, r.Name)
			}
			seen[s] = r.Name
			if got, ok := ByScheme(strings.ToUpper(s)); !ok || got.Name != r.Name {
				t.Errorf("ByScheme(%s) = %s, %v; want %s", strings.ToUpper(s), got.Name, ok, r.Name)
			}
		}
	}
	for port, want := range map[string]string{"2379": "etcd", "5432": "PostgreSQL", "6379": "Redis", "7000": "Redis"} {
		if r, ok := ForPort(port); !ok || r.Name != want {
			t.Errorf("ForPort(%s) = %s, %v; want %s", port, r.Name, ok, want)
		}
	}
}
