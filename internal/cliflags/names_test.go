package cliflags

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

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
