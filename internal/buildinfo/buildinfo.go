// Package buildinfo says which leaderrun this is, from the build info Go
// stamps into the binary and the version a release stamps (cmd).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Text is what --version prints for bi (nil when the binary carries none)
// and stamped, the release's version when a release was built (it wins over
// the module version): the version, the VCS commit (and whether the tree
// was modified) and the Go version the binary was built with.
func Text(stamped string, bi *debug.BuildInfo) string {
	v, goVersion := "dev", runtime.Version()
	var parts []string
	if bi != nil {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			c := "commit " + rev[:min(12, len(rev))]
			if modified == "true" {
				c += " with local changes"
			}
			parts = append(parts, c)
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	if stamped != "" {
		v = stamped
	}
	if v == "dev" && len(parts) == 0 {
		// Neither a release stamp, nor a module version, nor a commit: built
		// from a tree without VCS stamping (-buildvcs=false, no .git).
		parts = append(parts, "built without version information: no release stamp, module version or VCS commit, as with -buildvcs=false or outside a git checkout")
	}
	parts = append(parts, "built with "+goVersion+" for "+runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("leaderrun %s (%s)", v, strings.Join(parts, ", "))
}
