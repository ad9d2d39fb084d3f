package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Issue 11's cheap regression check: the start-up work that was cut must
// not come back. It checks what a run is built from and counts work, never
// time; scripts/bench.sh measures the times.

// linkedNever are packages whose presence in leaderrun itself would undo
// the cut: a network stack, libc (cgo, os/user's getpwuid), TLS, or a
// store client; each store's client lives in its own program.
var linkedNever = []string{"net", "os/user", "runtime/cgo", "crypto/tls", "net/http"}

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
		if rest, ok := strings.CutPrefix(pkg, "github.com/leaderrun/leaderrun/lease/"); ok && rest != "filelease" {
			t.Errorf("leaderrun links the store package %s", pkg)
		}
	}
}

// initBudget bounds the packages with initialisers that every run of
// leaderrun executes (49 when it was set, against 12 for a Go
// hello-world); raise it only with a measurement in scripts/bench.sh.
const initBudget = 52

// faultBudget bounds the minor page faults of leaderrun --version as a
// multiple of a Go hello-world built here (2.05x when it was set, from
// 3.4x before issue 11).
const faultBudget = 2.5

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
