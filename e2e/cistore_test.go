package e2e

import (
	"strings"
	"testing"
)

// TestFileStoreInCIWarned: in a CI job (CI, JENKINS_URL or TF_BUILD set) a
// run on the default file store, which excludes nothing across runners,
// says so in one warning line, also with -q, and still runs; a file store
// named with --store (a lease on one host is what is meant), CI=false, no
// CI variable, and bad input (one line only) are not warned of. Every CI
// variable is set or emptied here: the suite itself runs with CI=1.
func TestFileStoreInCIWarned(t *testing.T) {
	t.Parallel()
	const warning = "is set, and no --store is given: the default file store excludes only this host's processes"
	home := t.TempDir()
	base := []string{"HOME=" + home, "XDG_STATE_HOME=" + home, "CI=", "JENKINS_URL=", "TF_BUILD="}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		says string // the variable the warning names; "" for no warning
	}{
		{"CI", []string{"CI=true"}, nil, 0, "CI"},
		{"CI, quiet", []string{"CI=1"}, []string{"-q"}, 0, "CI"},
		{"Jenkins", []string{"JENKINS_URL=http://127.0.0.1:8080/"}, nil, 0, "JENKINS_URL"},
		{"Azure Pipelines", []string{"TF_BUILD=True"}, nil, 0, "TF_BUILD"},
		{"CI with a file store named", []string{"CI=true"}, []string{"--store", fileStore(t)}, 0, ""},
		{"CI=false", []string{"CI=false"}, nil, 0, ""},
		{"no CI", nil, nil, 0, ""},
		{"CI and bad input", []string{"CI=true"}, []string{"--ttl", "0s"}, 125, ""},
		{"CI and unsafe timing", []string{"CI=true"}, []string{"--renew-every", "-1s"}, 125, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append(tc.args, "--name", "ci"), "--", "true")
			code, stderr := runLR(t, append(append([]string(nil), base...), tc.env...), args...)
			warned := 0
			for _, l := range strings.Split(stderr, "\n") {
				if strings.Contains(l, warning) {
					warned++
					if !strings.HasPrefix(l, "leaderrun: "+tc.says+" is set") {
						t.Errorf("the warning %q does not name %s", l, tc.says)
					}
				}
			}
			if code != tc.code || (tc.says != "") != (warned == 1) || warned > 1 {
				t.Fatalf("exit %d, %d warnings: %s; want exit %d and a warning: %v", code, warned, stderr, tc.code, tc.says != "")
			}
			if tc.code != 0 && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("bad input: %q; want one line", stderr)
			}
		})
	}
}
