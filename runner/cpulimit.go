package runner

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// KillPathCPU is the CPU time a cgroup under a CPU limit may have to be
// granted, the child's share included, between a deadline of leaderrun or
// its guard and the child's death: the timer's wake-up, the Go runtime's
// hand-offs between threads, the SIGKILL, and the child's own exit, while
// a CPU-bound child competes for the same quota (and, with several CPUs,
// may take a whole period's quota on its own CPU: CFS hands quota out to
// each CPU in slices). It is about twice the worst that
// scripts/bench-overload.sh measured (docs/performance.md, under overload).
const KillPathCPU = 50 * time.Millisecond

// CPULimit is a CFS bandwidth limit (cgroup v2 cpu.max, v1
// cpu.cfs_quota_us and cpu.cfs_period_us) on the cgroup leaderrun runs in
// or on one of its ancestors: every process below it may run Quota of CPU
// time per Period, after which all of them, leaderrun, its guard and the
// child alike, wait for the next period (CFS throttling), whatever their
// priority or weight.
type CPULimit struct {
	Quota, Period time.Duration
	// Dir is the cgroup directory that sets it; V1 says it is a cgroup v1
	// one (cpu.cfs_quota_us).
	Dir string
	V1  bool
}

// Stall is how long the limit can hold the child's death back after a
// deadline: the periods it takes the cgroup to be granted KillPathCPU of
// CPU time, each whole (the deadline may come just after the quota ran
// out). Unused quota carried over (a burst) only lets the cgroup run longer
// before it is throttled, never makes it wait longer, so it does not count.
func (l CPULimit) Stall() time.Duration {
	n := (KillPathCPU + l.Quota - 1) / l.Quota
	return time.Duration(n) * l.Period
}

// String names the limit as a user would look for it: "a CPU limit of 5 %
// of a core (cpu.max 5000 100000 in /sys/fs/cgroup/x)".
func (l CPULimit) String() string {
	pct := strconv.FormatFloat(100*float64(l.Quota)/float64(l.Period), 'f', -1, 64)
	setting := fmt.Sprintf("cpu.max %d %d", l.Quota.Microseconds(), l.Period.Microseconds())
	if l.V1 {
		setting = fmt.Sprintf("cpu.cfs_quota_us %d, cpu.cfs_period_us %d", l.Quota.Microseconds(), l.Period.Microseconds())
	}
	return fmt.Sprintf("a CPU limit of %s%% of a core (%s in %s)", pct, setting, l.Dir)
}

// CPULimitStall returns the Stall of the CPU limit that can hold leaderrun
// and its child off the CPU longest (FindCPULimit) and the limit's name, or
// zero and "" when no limit binds. lease.Timing adds it to its kill bound.
func CPULimitStall() (time.Duration, string) {
	l, ok := FindCPULimit()
	if !ok {
		return 0, ""
	}
	return l.Stall(), l.String()
}

// FindCPULimit returns the CPU limit with the longest Stall among those on
// leaderrun's own cgroup and its ancestors, in the v2 hierarchy and in a
// v1 cpu hierarchy (hybrid hosts). A limit of at least as many cores as
// leaderrun may run on never throttles and is ignored. ok is false when
// no limit binds or none can be read.
func FindCPULimit() (CPULimit, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return CPULimit{}, false
	}
	var set unix.CPUSet
	cpus := 1
	if unix.SchedGetaffinity(0, &set) == nil && set.Count() > 0 {
		cpus = set.Count()
	}
	var best CPULimit
	consider := func(l CPULimit) {
		if l.Quota > 0 && l.Period > 0 && l.Quota < time.Duration(cpus)*l.Period && l.Stall() > bestStall(best) {
			best = l
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		// ID:CONTROLLERS:PATH; v2 is "0::PATH".
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			if mnt, err := cgroup2Mount(); err == nil {
				walkUp(mnt, parts[2], func(dir string) { consider(readCPUMax(dir)) })
			}
		case hasController(parts[1], "cpu"):
			if mnt, rel, ok := cgroup1CPUMount(parts[2]); ok {
				walkUp(mnt, rel, func(dir string) { consider(readCFSQuota(dir)) })
			}
		}
	}
	return best, best.Quota > 0
}

func bestStall(l CPULimit) time.Duration {
	if l.Quota <= 0 {
		return 0
	}
	return l.Stall()
}

// walkUp calls f with mnt/rel and each of its ancestors up to mnt itself:
// the host's root cgroup has no limit, but inside a cgroup namespace (a
// container's) the mount's root is the container's own cgroup, which has.
func walkUp(mnt, rel string, f func(dir string)) {
	for rel = filepath.Clean("/" + rel); rel != "/"; rel = filepath.Dir(rel) {
		f(filepath.Join(mnt, rel))
	}
	f(mnt)
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readCPUMax reads a v2 cpu.max ("max 100000" or "5000 100000").
func readCPUMax(dir string) CPULimit {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return CPULimit{}
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return CPULimit{}
	}
	q, err1 := strconv.ParseInt(f[0], 10, 64)
	p, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil { // "max": no limit
		return CPULimit{}
	}
	return CPULimit{Quota: time.Duration(q) * time.Microsecond, Period: time.Duration(p) * time.Microsecond, Dir: dir}
}

// readCFSQuota reads v1 cpu.cfs_quota_us (-1: no limit) and cpu.cfs_period_us.
func readCFSQuota(dir string) CPULimit {
	read := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return -1
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return -1
		}
		return v
	}
	q := read("cpu.cfs_quota_us")
	if q <= 0 {
		return CPULimit{}
	}
	p := read("cpu.cfs_period_us")
	if p <= 0 {
		return CPULimit{}
	}
	return CPULimit{Quota: time.Duration(q) * time.Microsecond, Period: time.Duration(p) * time.Microsecond, Dir: dir, V1: true}
}

// cgroup1CPUMount finds the v1 hierarchy with the cpu controller: its mount
// point and own's path below it. The usual mounts first (mountinfo costs
// more to read), then mountinfo, whose root field tells a container's bind
// mount of a subtree apart.
func cgroup1CPUMount(own string) (mnt, rel string, ok bool) {
	for _, m := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"} {
		if _, err := os.Stat(filepath.Join(m, own, "cpu.cfs_quota_us")); err == nil {
			return m, own, true
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, found := strings.Cut(sc.Text(), " - ")
		fs, fields := strings.Fields(post), strings.Fields(pre)
		if !found || len(fs) < 3 || fs[0] != "cgroup" || !hasController(fs[2], "cpu") || len(fields) < 5 {
			continue
		}
		root := unescapeMount(fields[3])
		r, inside := strings.CutPrefix(own, root)
		if root == "/" {
			r, inside = own, true
		}
		if inside {
			return unescapeMount(fields[4]), r, true
		}
	}
	return "", "", false
}
