package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// Text says version, commit and Go version.
func TestText(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "leaderrun dev (built without version information: no release stamp, module version or VCS commit, as with -buildvcs=false or outside a git checkout, built with " + runtime.Version()},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"leaderrun dev (built without version information: no release stamp, module version or VCS commit, as with -buildvcs=false or outside a git checkout, built with go1.26.0 for "},
		{"release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}},
			"leaderrun v1.2.3 (built with go1.26.0 for "},
		{"clean checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "5fb793553759488abcaf1091d4ac4a48deefd326"}, {Key: "vcs.modified", Value: "false"}}},
			"leaderrun dev (commit 5fb793553759, built with go1.26.0 for "},
		{"dirty checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261122235307-5fb793553759+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "5fb793553759488abcaf1091d4ac4a48deefd326"}, {Key: "vcs.modified", Value: "true"}}},
			"leaderrun v0.0.0-20261122235307-5fb793553759+dirty (commit 5fb793553759 with local changes, built with go1.26.0 for "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text("", tc.bi); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("Text = %q; want it to start with %q", got, tc.want)
			}
		})
	}
}
