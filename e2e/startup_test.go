package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cheap start-up regression checks: the start-up work that was cut must not
// come back. They check what a run is built from and count work; the one
// timed check compares medians of interleaved rounds against a Go floor
// built in the same run, never an absolute time. scripts/bench.sh measures
// the times.

// linkedNever are packages whose presence in leaderrun itself would undo
// the cut: a network stack, libc (cgo, os/user's getpwuid), TLS, or a
// store client; each store's client lives in its own program. crypto/rand
// brings 15 packages with initialisers for 16 random bytes a run
// (lease.Random reads them from getrandom(2)).
var linkedNever = []string{"net", "os/user", "runtime/cgo", "crypto/tls", "net/http", "crypto/rand"}

var clientModules = []string{"github.com/redis/", "github.com/Azure/", "go.etcd.io/", "github.com/jackc/", "google.golang.org/"}

func TestStartupLinksNoStoreClient(t *testing.T) {
	out, err := exec.Command(goBin(), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if slices.Contains(linkedNever, pkg) {
			t.Errorf("leaderrun links %s; keep it in a store program (go mod why -m, go list -deps)", pkg)
		}
		for _, m := range clientModules {
			if strings.HasPrefix(pkg, m) {
				t.Errorf("leaderrun links the store client package %s", pkg)
			}
		}
		// storetab describes every store as data and links none.
		if rest, ok := strings.CutPrefix(pkg, "github.com/leaderrun/leaderrun/lease/"); ok && rest != "filelease" && rest != "storetab" {
			t.Errorf("leaderrun links the store package %s", pkg)
		}
	}
}

// initBudget bounds the packages with initialisers that every run of
// leaderrun executes (49 when it was first set, 34 once crypto/rand left,
// against 12 for a Go hello-world; 2 more for robfig/cron, measured in
// docs/performance.md's Start-up cost); raise it only with a measurement in
// scripts/bench.sh.
const initBudget = 39

// faultBudget bounds the minor page faults of leaderrun --version as a
// multiple of a Go hello-world built here (2.05x when it was first set, from
// 3.4x; 1.66x since --version prints without building the command line).
const faultBudget = 2.2

func TestStartupWork(t *testing.T) {
	cmd := exec.Command(lrBin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	inits := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "init ") {
			inits++
		}
	}
	t.Logf("packages with initialisers run by leaderrun --version: %d (budget %d)", inits, initBudget)
	if inits == 0 || inits > initBudget {
		t.Errorf("%d packages with initialisers run at start-up; budget %d (GODEBUG=inittrace=1 leaderrun --version shows them)", inits, initBudget)
	}

	hello := filepath.Join(t.TempDir(), "hello")
	if out, err := exec.Command(goBin(), "build", "-o", hello, "./scripts/startcost/hello").CombinedOutput(); err != nil {
		t.Fatalf("building hello: %v\n%s", err, out)
	}
	lr, hw := medianFaults(t, lrBin, "--version"), medianFaults(t, hello)
	ratio := float64(lr) / float64(hw)
	t.Logf("minor page faults: leaderrun --version %d, hello-world %d: %.2fx (budget %.2fx)", lr, hw, ratio, faultBudget)
	if ratio > faultBudget {
		t.Errorf("leaderrun --version takes %.2fx the page faults of a Go hello-world; budget %.2fx", ratio, faultBudget)
	}
}

// medianFaults is the median count of minor page faults of 9 runs.
func medianFaults(t *testing.T, argv ...string) int64 {
	t.Helper()
	var v []int64
	for range 9 {
		c := exec.Command(argv[0], argv[1:]...)
		if err := c.Run(); err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		v = append(v, c.ProcessState.SysUsage().(*syscall.Rusage).Minflt)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// The guard is decided in runner's init: a process started as the guard
// never initialises the packages that import runner (the command line and
// its renderers, a store's client). Counted, not timed.
func TestStartupGuardInits(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	var out strings.Builder
	// Its socket is /dev/null here: the guard reads its end at once and
	// exits 0, having been told of no tree.
	cmd := &exec.Cmd{Path: lrBin, Args: []string{"leaderrun: guard", "protocol-3"},
		Env: []string{"GODEBUG=inittrace=1"}, Stderr: &out, ExtraFiles: []*os.File{devnull}}
	if err := cmd.Run(); err != nil {
		t.Fatalf("guard: %v\n%s", err, out.String())
	}
	inits := 0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		inits++
		for _, never := range []string{"github.com/urfave/", "github.com/russross/", "github.com/leaderrun/leaderrun/cmd"} {
			if strings.HasPrefix(f[1], never) {
				t.Errorf("the guard initialised %s: it must be decided before the packages that import runner", f[1])
			}
		}
	}
	t.Logf("packages with initialisers run by the guard: %d (leaderrun --version: see TestStartupWork)", inits)
	if inits == 0 {
		t.Fatalf("no inittrace output from the guard:\n%s", out.String())
	}
}

// startRatioBound bounds a file-store run of `-- true` as a multiple of the
// Go floor (scripts/startcost/floor: flock, a process group, Pdeathsig,
// exec) built in the same test, by the median of interleaved rounds, in wall
// time, CPU time (user+system of the whole tree) and minor page faults. On
// a 2-core machine at load 20-30 the run took 4.0-4.6x the floor's wall and
// CPU time (2.9-3.2x quiet) before its history records became appends;
// 2.7x wall and 3.2x CPU at load 3 since: the bound is generous, so that
// only a real regression (a second Go start-up on the critical path, a
// store client linked back in) crosses it, and a busy machine does not.
const startRatioBound = 7.5

// faultRatioBound is the same bound for minor page faults, which a busy
// machine does not move: it catches code or memory added to every run
// (3.4-4.1x when it was first set, 3.1x since the history appends).
const faultRatioBound = 4.5

func TestStartupRatioToFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("interleaved rounds of start-ups")
	}
	dir := t.TempDir()
	floor := filepath.Join(dir, "floor")
	if out, err := exec.Command(goBin(), "build", "-o", floor, "./scripts/startcost/floor").CombinedOutput(); err != nil {
		t.Fatalf("building the floor: %v\n%s", err, out)
	}
	store := t.TempDir()
	variants := [][]string{
		{floor, filepath.Join(store, "floor.lock"), "true"},
		{lrBin, "-q", "--store", "file://" + store, "--name", "startup", "--", "true"},
	}
	const rounds, warm = 31, 3
	samples := make([][]startSample, len(variants))
	for i := range rounds + warm {
		for j, argv := range variants {
			s := runOnce(t, argv)
			if i >= warm {
				samples[j] = append(samples[j], s)
			}
		}
	}
	fl, lr := medianSample(samples[0]), medianSample(samples[1])
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, m := range []struct {
		what, unit string
		lr, fl     float64
		bound      float64
	}{
		{"wall time", "ms", ms(lr.wall), ms(fl.wall), startRatioBound},
		{"CPU time", "ms", ms(lr.cpu), ms(fl.cpu), startRatioBound},
		{"minor page faults", "", float64(lr.faults), float64(fl.faults), faultRatioBound},
	} {
		ratio := m.lr / max(m.fl, 0.001)
		t.Logf("%s: leaderrun -- true %.3g%s, Go floor %.3g%s: %.2fx (bound %.1fx)", m.what, m.lr, m.unit, m.fl, m.unit, ratio, m.bound)
		if ratio > m.bound {
			t.Errorf("a file-store run of -- true takes %.2fx the Go floor's %s (median of %d interleaved rounds); bound %.1fx: scripts/bench.sh and docs/performance.md say where the time goes", ratio, m.what, rounds, m.bound)
		}
	}
}

type startSample struct {
	wall, cpu time.Duration
	faults    int64
}

// runOnce runs argv to its end (it must exit 0) and returns its wall time
// and, from wait4's rusage (the reaped descendants included), its CPU time
// and minor page faults.
func runOnce(t *testing.T, argv []string) startSample {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	begin := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	wall := time.Since(begin)
	ru := c.ProcessState.SysUsage().(*syscall.Rusage)
	return startSample{wall: wall, cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), faults: ru.Minflt}
}

// medianSample is the per-field median.
func medianSample(s []startSample) startSample {
	med := func(get func(startSample) int64) int64 {
		v := make([]int64, 0, len(s))
		for _, x := range s {
			v = append(v, get(x))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return startSample{
		wall:   time.Duration(med(func(x startSample) int64 { return int64(x.wall) })),
		cpu:    time.Duration(med(func(x startSample) int64 { return int64(x.cpu) })),
		faults: med(func(x startSample) int64 { return x.faults }),
	}
}
