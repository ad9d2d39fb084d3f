package runner

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNoCgroup is wrapped by NewCgroup when no writable cgroup v2 hierarchy is
// available for a sub-cgroup (not mounted, no cgroup.kill, or not writable by
// us: cgroup v1 only, an unprivileged user without delegation).
var ErrNoCgroup = errors.New("no writable cgroup v2 hierarchy")

// Cgroup is a cgroup v2 sub-cgroup made for one child's tree. Every process
// the child starts stays in it, whatever it does with sessions and process
// groups (setsid, double forks), so writing cgroup.kill stops all of them and
// "populated 0" in cgroup.events means the whole tree is gone.
//
// The zero value is not usable; call NewCgroup. Remove deletes it.
type Cgroup struct {
	dir string
	fd  *os.File // the directory, for clone3(CLONE_INTO_CGROUP)
}

// NewCgroup creates a fresh sub-cgroup under the cgroup leaderrun itself runs
// in, named leaderrun-PID-N. It returns an error wrapping ErrNoCgroup when that
// is impossible, so callers can fall back to the process group.
func NewCgroup() (*Cgroup, error) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(mnt, own)
	if err := delegated(parent); err != nil {
		return nil, err
	}
	removeStale(parent)
	var dir string
	for i := 0; ; i++ {
		dir = filepath.Join(parent, fmt.Sprintf("leaderrun-%d-%d", os.Getpid(), i))
		err = unix.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if errors.Is(err, unix.EEXIST) && i < 100 {
			continue
		}
		return nil, fmt.Errorf("%w: create %s: %w", ErrNoCgroup, dir, err)
	}
	c := &Cgroup{dir: dir}
	// cgroup.kill appeared in Linux 5.14; without it the tree cannot be
	// killed as one, and the process group is the better unit.
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("%w: %s has no cgroup.kill (Linux < 5.14)", ErrNoCgroup, dir)
	}
	fd, err := os.Open(dir)
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("%w: open %s: %w", ErrNoCgroup, dir, err)
	}
	c.fd = fd
	return c, nil
}

// OpenCgroup returns the existing sub-cgroup at dir (the guard uses it to
// act on a cgroup leaderrun made).
func OpenCgroup(dir string) *Cgroup { return &Cgroup{dir: dir} }

// Path returns the cgroup's directory.
func (c *Cgroup) Path() string { return c.dir }

// Kill sends SIGKILL to every process in the cgroup, atomically with respect
// to forks (cgroup.kill). A cgroup that is already gone is not an error.
func (c *Cgroup) Kill() error {
	err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Signal sends sig to every process listed in the cgroup. Unlike Kill it can
// miss a process forked while it runs; Kill is the backstop.
func (c *Cgroup) Signal(sig syscall.Signal) error {
	pids, err := c.pids()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

func (c *Cgroup) pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Populated reports whether any process (zombies included, until reaped) is
// still in the cgroup or below it. A removed cgroup is not populated.
func (c *Cgroup) Populated() (bool, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return v != "0", nil
		}
	}
	return true, fmt.Errorf("no populated line in %s/cgroup.events", c.dir)
}

// Sub creates (or opens) the cgroup name inside c, for processes that
// belong to the child's run without being the child's: health checks. It is
// inside c, so whatever kills or waits for c's tree (cgroup.kill and
// "populated" cover descendants) covers it too, the guard included.
func (c *Cgroup) Sub(name string) (*Cgroup, error) {
	dir := filepath.Join(c.dir, name)
	if err := unix.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	fd, err := os.Open(dir)
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return &Cgroup{dir: dir, fd: fd}, nil
}

// Remove closes the cgroup's descriptor and deletes its directory and every
// cgroup below it, deepest first (a child running as root may have made
// some), which the kernel allows only once they are empty. Removing twice
// is not an error.
func (c *Cgroup) Remove() error {
	if c.fd != nil {
		c.fd.Close()
		c.fd = nil
	}
	return removeTree(c.dir)
}

// removeTree removes the cgroup directory dir after the cgroups below it.
func removeTree(dir string) error {
	if d, err := os.Open(dir); err == nil {
		ents, _ := d.ReadDir(-1)
		d.Close()
		for _, e := range ents {
			if e.IsDir() {
				_ = removeTree(filepath.Join(dir, e.Name()))
			}
		}
	}
	err := unix.Rmdir(dir)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// removeStale removes empty sub-cgroups that earlier runs left in parent
// (leaderrun-PID-N whose PID no longer runs): a leaderrun SIGKILLed in the
// instant between making its cgroup and telling its guard leaves one. The
// kernel refuses to remove a cgroup that still has processes.
func removeStale(parent string) {
	d, err := os.Open(parent)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, "leaderrun-")
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		_ = removeTree(filepath.Join(parent, n)) // with what its child or checks made inside
	}
}

// delegated refuses the cgroup of a systemd unit that was not given
// Delegate=yes: systemd owns such a cgroup and may move or remove sub-cgroups
// it did not make. systemd marks delegated cgroups with a "delegate" xattr.
func delegated(dir string) error {
	base := filepath.Base(dir)
	if !strings.HasSuffix(base, ".service") && !strings.HasSuffix(base, ".scope") {
		return nil
	}
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && string(buf[:n]) == "1" {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is a systemd unit's cgroup without Delegate=yes", ErrNoCgroup, dir)
}

// cgroup2Mount finds where the unified (v2) hierarchy is mounted: not always
// /sys/fs/cgroup (hybrid hosts mount it at /sys/fs/cgroup/unified).
func cgroup2Mount() (string, error) {
	// The usual places first: statfs is far cheaper than the kernel's
	// rendering of mountinfo, which showed in the start-up cost of every
	// run. A mount there counts only when our own cgroup is visible under
	// it, which a bind mount of a subtree (the case mountinfo's root field
	// tells apart) would not show.
	if own, err := ownCgroup(); err == nil {
		for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			var st unix.Statfs_t
			if unix.Statfs(mnt, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
				if _, err := os.Stat(filepath.Join(mnt, own, "cgroup.procs")); err == nil {
					return mnt, nil
				}
			}
		}
	}
	return cgroup2MountInfo()
}

// cgroup2MountInfo is cgroup2Mount by /proc/self/mountinfo: the first
// cgroup2 mount of the hierarchy's root.
func cgroup2MountInfo() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		if fs := strings.Fields(post); len(fs) == 0 || fs[0] != "cgroup2" {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 || fields[3] != "/" {
			continue // a bind mount of a subtree: its paths do not match ours
		}
		return unescapeMount(fields[4]), nil
	}
	return "", fmt.Errorf("%w: cgroup2 is not mounted", ErrNoCgroup)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup returns our cgroup v2 path ("0::/PATH" in /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: not in a cgroup v2 hierarchy", ErrNoCgroup)
}
