package e2e

import (
	"os/exec"
	"testing"
)

// needTool returns the path of the program prog, failing the test without
// it with the line that installs it: the Debian package pkg, which
// scripts/test.sh installs.
func needTool(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s not found: install it with `apt-get install --no-install-recommends %s` (scripts/test.sh does)", prog, pkg)
	}
	return p
}
