package leasetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// Derived is what a store derives from one lease name: Objects, by kind,
// are the names of everything it keeps for the lease (keys, blobs, rows,
// objects, files, channels), slots included; Ranges are the prefixes it
// lists or deletes by (every object starting with one is taken as the
// lease's).
type Derived struct {
	Objects map[string]string
	Ranges  []string
}

// DerivedNames checks that no lease name can reach another's objects: over
// seeds and every valid lease name found inside what the seeds derive (the
// names an attacker would try: x.history, x.runs-0.new-a, ...), no two
// names, or two kinds of one name, derive the same object, and no object of
// one name starts with a range of another.
func DerivedNames(t *testing.T, seeds []string, derive func(name string) Derived) {
	t.Helper()
	names := map[string]bool{}
	for _, n := range seeds {
		if lease.ValidateName(n) == nil {
			names[n] = true
		}
		for _, o := range derive(n).Objects {
			for i := range len(o) {
				for j := i + 1; j <= len(o) && j-i <= 80; j++ {
					if c := o[i:j]; lease.ValidateName(c) == nil {
						names[c] = true
					}
				}
			}
		}
	}
	type owned struct{ obj, owner, name string }
	var all []owned
	ranges := map[string][]string{}
	seen := map[string]string{}
	for n := range names {
		d := derive(n)
		ranges[n] = d.Ranges
		for kind, o := range d.Objects {
			owner := kind + " of " + n
			if prev, ok := seen[o]; ok {
				t.Errorf("%s and %s are both %q", prev, owner, o)
			}
			seen[o] = owner
			all = append(all, owned{o, owner, n})
		}
	}
	slices.SortFunc(all, func(a, b owned) int { return strings.Compare(a.obj, b.obj) })
	for n, rs := range ranges {
		for _, r := range rs {
			i, _ := slices.BinarySearchFunc(all, r, func(a owned, r string) int { return strings.Compare(a.obj, r) })
			for ; i < len(all) && strings.HasPrefix(all[i].obj, r); i++ {
				if all[i].name != n {
					t.Errorf("%s (%q) is in the range %q of lease %s", all[i].owner, all[i].obj, r, n)
				}
			}
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d lease names, %d objects: none shared", len(names), len(all))
}
