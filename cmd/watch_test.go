package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/leaseview"
	"github.com/leaderrun/leaderrun/lease"
)

func TestPrintChanges(t *testing.T) {
	a := &lease.Holder{Label: "a", Token: 5}
	b := &lease.Holder{Label: "b", Token: 6}
	sb := func(id, holder string, p int) lease.Candidate {
		return lease.Candidate{ID: id, Label: holder, Priority: p}
	}
	for _, tc := range []struct {
		name      string
		last, now leaseview.View
		want      []string
	}{
		{"nothing", leaseview.View{Holder: a}, leaseview.View{Holder: a}, nil},
		{"released", leaseview.View{Holder: a}, leaseview.View{}, []string{"j: free"}},
		{"joined", leaseview.View{Holder: a}, leaseview.View{Holder: a, Standbys: []lease.Candidate{sb("1", "b", 3)}},
			[]string{"j: standby b joined (priority 3)"}},
		{"left", leaseview.View{Holder: a, Standbys: []lease.Candidate{sb("1", "b", 3)}}, leaseview.View{Holder: a},
			[]string{"j: standby b left (priority 3)"}},
		{"took over: the holder line only", leaseview.View{Holder: a, Standbys: []lease.Candidate{sb("1", "b", 0), sb("2", "c", 0)}},
			leaseview.View{Holder: b, Standbys: []lease.Candidate{sb("2", "c", 0)}}, []string{"j: held by b, token 6"}},
		// The new holder was still listed as a standby on the look that
		// saw it take over: its leaving on the next look is no news.
		{"took over a look earlier", leaseview.View{Holder: b, Standbys: []lease.Candidate{sb("1", "b", 0)}},
			leaseview.View{Holder: b}, nil},
		{"took over, by ID", leaseview.View{Holder: &lease.Holder{Label: "web", ID: "1", Token: 7}, Standbys: []lease.Candidate{sb("1", "web", 0), sb("2", "web", 0)}},
			leaseview.View{Holder: &lease.Holder{Label: "web", ID: "1", Token: 7}, Standbys: []lease.Candidate{sb("2", "web", 0)}}, nil},
		{"another instance with the holder's label leaves", leaseview.View{Holder: &lease.Holder{Label: "web", ID: "1", Token: 7}, Standbys: []lease.Candidate{sb("2", "web", 0)}},
			leaseview.View{Holder: &lease.Holder{Label: "web", ID: "1", Token: 7}}, []string{"j: standby web left (priority 0)"}},
		// A key or lock file without leaderrun's record: the wording status
		// uses, not "held by , token 26".
		{"unknown holder", leaseview.View{}, leaseview.View{Holder: &lease.Holder{Token: 26}}, []string{"j: held by an unknown process (no leaderrun record), token 26"}},
		{"unknown holder without a token", leaseview.View{}, leaseview.View{Holder: &lease.Holder{}}, []string{"j: held by an unknown process (no leaderrun record)"}},
		{"holder first, then left, then joined", leaseview.View{Holder: a, Standbys: []lease.Candidate{sb("1", "x", 0)}},
			leaseview.View{Standbys: []lease.Candidate{sb("2", "y", 1)}},
			[]string{"j: free", "j: standby x left (priority 0)", "j: standby y joined (priority 1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			p := watchPrinter{e: env{stdio: Stdio{Out: f}}, name: "j", started: time.Now()}
			changed := printChanges(p, tc.last, tc.now)
			f.Close()
			b, _ := os.ReadFile(path)
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				f := strings.SplitN(l, " ", 3)
				if len(f) == 3 {
					got = append(got, f[2]) // without the time and its zone
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || changed != (len(tc.want) > 0) {
				t.Fatalf("printed %q (changed %v); want %q", got, changed, tc.want)
			}
		})
	}
}

func TestUnrecorded(t *testing.T) {
	old := &lease.Holder{Label: "a", Token: 5}
	for _, tc := range []struct {
		name    string
		h, last *lease.Holder
		highest uint64
		want    bool
	}{
		{"free", nil, old, 5, false},
		{"no record yet", &lease.Holder{}, nil, 5, true},
		{"the previous holder's record after a release", &lease.Holder{Label: "a", Token: 5}, nil, 5, true},
		{"the same holder still", &lease.Holder{Label: "a", Token: 5}, old, 5, false},
		{"an older record", &lease.Holder{Label: "z", Token: 4}, old, 5, true},
		{"a new acquisition", &lease.Holder{Label: "b", Token: 6}, nil, 5, false},
		{"first look", &lease.Holder{Label: "a", Token: 5}, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unrecorded(tc.h, tc.last, tc.highest); got != tc.want {
				t.Fatalf("unrecorded = %v; want %v", got, tc.want)
			}
		})
	}
}
