package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The stall is whole periods until the cgroup has been granted KillPathCPU:
// 50 periods at 1 ms a period, 10 at 5 ms, one at a quota that covers it.
func TestCPULimitStall(t *testing.T) {
	for _, c := range []struct {
		quota, period, want time.Duration
	}{
		{time.Millisecond, 100 * time.Millisecond, 5 * time.Second},
		{5 * time.Millisecond, 100 * time.Millisecond, time.Second},
		{50 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		{70 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		{7 * time.Millisecond, 10 * time.Millisecond, 80 * time.Millisecond},
	} {
		l := CPULimit{Quota: c.quota, Period: c.period}
		if got := l.Stall(); got != c.want {
			t.Errorf("%v per %v: stall %v, want %v", c.quota, c.period, got, c.want)
		}
	}
	l := CPULimit{Quota: 5 * time.Millisecond, Period: 100 * time.Millisecond, Dir: "/sys/fs/cgroup/x"}
	if got, want := l.String(), "a CPU limit of 5% of a core (cpu.max 5000 100000 in /sys/fs/cgroup/x)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// FindCPULimit finds a real limit on the cgroup the test runs in: the test
// moves itself into a cgroup limited to 1.5 cores (below the 2 it may run
// on, so it binds; enough not to slow the test), looks, and moves back.
// Needs root and a cpu controller (v2 cpu.max, or v1 cpu.cfs_quota_us).
func TestFindCPULimit(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a cgroup with a CPU limit")
	}
	if l, ok := FindCPULimit(); ok {
		t.Skipf("the test already runs under %s", l)
	}
	dir, parent, v1 := cpuTestCgroup(t)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		t.Skipf("cannot enter %s: %v", dir, err)
	}
	l, ok := FindCPULimit()
	if err := os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		t.Fatalf("cannot leave %s: %v", dir, err)
	}
	if !ok || l.Dir != dir || l.V1 != v1 || l.Quota != 150*time.Millisecond || l.Period != 100*time.Millisecond {
		t.Fatalf("FindCPULimit() = %+v, %v; want 150ms per 100ms in %s", l, ok, dir)
	}
	if stall, cause := CPULimitStall(); stall != 0 || cause != "" {
		t.Fatalf("outside the cgroup: CPULimitStall() = %v, %q; want none", stall, cause)
	}
}

// cpuTestCgroup makes a cgroup limited to 1.5 cores under the hierarchy's
// root (v2 where the cpu controller is there, else v1), removed at cleanup.
// It returns its directory and the test's own cgroup in that hierarchy.
func cpuTestCgroup(t *testing.T) (dir, own string, v1 bool) {
	t.Helper()
	name := "leaderrun-cputest-" + strconv.Itoa(os.Getpid())
	if mnt, err := cgroup2Mount(); err == nil {
		if b, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers")); err == nil && hasController(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", ","), "cpu") {
			_ = os.WriteFile(filepath.Join(mnt, "cgroup.subtree_control"), []byte("+cpu"), 0)
			dir = filepath.Join(mnt, name)
			if err := os.Mkdir(dir, 0o755); err == nil {
				t.Cleanup(func() { _ = os.Remove(dir) })
				if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte("150000 100000"), 0); err != nil {
					t.Skipf("cpu.max: %v", err)
				}
				self, err := ownCgroup()
				if err != nil {
					t.Skip(err)
				}
				return dir, filepath.Join(mnt, self), false
			}
		}
	}
	self := ""
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[0] != "0" && hasController(f[1], "cpu") {
			self = f[2]
		}
	}
	mnt, rel, ok := cgroup1CPUMount(self)
	if self == "" || !ok {
		t.Skip("no cpu controller here")
	}
	dir = filepath.Join(mnt, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		t.Skipf("cannot make a v1 cpu cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	for file, v := range map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "150000"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
			t.Skipf("%s: %v", file, err)
		}
	}
	return dir, filepath.Join(mnt, rel), true
}
