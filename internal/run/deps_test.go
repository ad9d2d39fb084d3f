package run

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The run is the command line's client, not part of it: it takes a plain
// Config, and nothing it imports, directly or not, is urfave/cli.
func TestImportsNoCommandLine(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/urfave/") || pkg == "github.com/leaderrun/leaderrun/cmd" {
			t.Errorf("internal/run depends on %s", pkg)
		}
	}
}
