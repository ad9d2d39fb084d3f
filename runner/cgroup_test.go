package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroup2MountFastPath: the statfs shortcut names the mount that
// mountinfo names.
func TestCgroup2MountFastPath(t *testing.T) {
	want, err := cgroup2MountInfo()
	if err != nil {
		t.Skipf("no cgroup2 mount here: %v", err)
	}
	got, err := cgroup2Mount()
	if err != nil || got != want {
		t.Fatalf("cgroup2Mount() = %q, %v; mountinfo says %q", got, err, want)
	}
}

// A cgroup with cgroups made inside it (a root child's nested cgroup, the
// health checks' own) is removed whole, deepest first: a nested directory
// once stayed behind for good.
func TestCgroupRemoveNested(t *testing.T) {
	cg, err := NewCgroup()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup here: %v", err)
		}
		t.Skipf("no cgroup here: %v", err)
	}
	nested := filepath.Join(cg.Path(), "nested", "deeper")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		cg.Remove()
		t.Fatal(err)
	}
	sub, err := cg.Sub("health-1")
	if err != nil {
		t.Fatal(err)
	}
	sub.fd.Close()
	if err := cg.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(cg.Path()); !os.IsNotExist(err) {
		t.Fatalf("%s still there after Remove: %v", cg.Path(), err)
	}
}
