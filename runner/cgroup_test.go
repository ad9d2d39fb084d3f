package runner

import "testing"

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
