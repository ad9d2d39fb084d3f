package cmd

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease/bloblease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	"github.com/leaderrun/leaderrun/lease/kubelease"
	"github.com/leaderrun/leaderrun/lease/pglease"
	"github.com/leaderrun/leaderrun/lease/redislease"
	"github.com/leaderrun/leaderrun/runner"
)

// TestDrivers: every scheme of a store package is dispatched to the program
// that links it, and that program exists as cmd/<name>/main.go importing
// the store package; no scheme is dispatched that no store serves.
func TestDrivers(t *testing.T) {
	served := map[string]string{}
	for prog, schemes := range map[string][]string{
		"leaderrun-redis":      redislease.Schemes,
		"leaderrun-azblob":     bloblease.Schemes(),
		"leaderrun-etcd":       etcdlease.Schemes,
		"leaderrun-postgres":   pglease.Schemes,
		"leaderrun-kubernetes": kubelease.Schemes,
	} {
		for _, s := range schemes {
			served[s] = prog
			if drivers[s] != prog {
				t.Errorf("scheme %s: dispatched to %q; want %q", s, drivers[s], prog)
			}
		}
	}
	for s, prog := range drivers {
		if served[s] != prog {
			t.Errorf("drivers[%q] = %q, but no store of that program serves it", s, prog)
		}
	}
	progs := map[string]bool{}
	for _, p := range drivers {
		progs[p] = true
	}
	for prog := range progs {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(prog, "main.go"), nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", prog, err)
			continue
		}
		var imports []string
		for _, im := range f.Imports {
			imports = append(imports, strings.Trim(im.Path.Value, `"`))
		}
		if !slices.Contains(imports, "github.com/leaderrun/leaderrun/cmd") || f.Name.Name != "main" {
			t.Errorf("cmd/%s/main.go is not a main package calling cmd.Main", prog)
		}
	}
}

func TestDispatchable(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "LEADERRUN_STORE" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		args []string
		env  string
		want string
		ok   bool
	}{
		{[]string{"--store=redis://h:1"}, "", "redis://h:1", true},
		{[]string{"--store=redis://h:1", "--store=azblob://a/c"}, "", "azblob://a/c", true},
		{nil, "redis://e:1", "redis://e:1", true},
		{[]string{"--store=file:///x"}, "redis://e:1", "file:///x", true},
		{[]string{"status", "--store=redis://h:1"}, "", "redis://h:1", true},
		{[]string{"--store=redis://h:1", "--help"}, "", "", false},
		{[]string{"--version"}, "redis://e:1", "", false},
		{[]string{"help", "status"}, "redis://e:1", "", false},
		{nil, "", "", false},
	} {
		got, ok := preparse(c.args, false, nil, (&invocation{flags: formFlags(takeEnv)}).scopes()).dispatchable(env(c.env))
		if got != c.want || ok != c.ok {
			t.Errorf("dispatchable(%q, LEADERRUN_STORE=%q) = %q, %v; want %q, %v", c.args, c.env, got, ok, c.want, c.ok)
		}
	}
}

// TestTakeGuardImage: a descriptor of the dispatching leaderrun's image is
// the guard program (trusted: no handshake before the child) only when that
// leaderrun speaks this build's guard protocol; either way it is made
// close-on-exec and the variables leave the environment.
func TestTakeGuardImage(t *testing.T) {
	f, err := os.Open(selfImage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	image := imageFDPrefix + strconv.Itoa(fd)
	for _, tc := range []struct {
		protocol, want string
	}{
		{runner.GuardProtocol(), image},
		{"protocol-0", ""}, // another build's leaderrun: the guard runs from this image
		{"", ""},
	} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			t.Fatal(err)
		}
		vars := []string{"A=1", envGuardProgram + "=" + image}
		if tc.protocol != "" {
			vars = append(vars, envGuardProtocol+"="+tc.protocol)
		}
		e := takeGuardProgram(env{vars: vars})
		if e.guardProgram != tc.want || !e.dispatched || len(e.vars) != 1 || e.vars[0] != "A=1" {
			t.Errorf("protocol %q: guardProgram %q, dispatched %v, vars %q; want %q, true, [A=1]", tc.protocol, e.guardProgram, e.dispatched, e.vars, tc.want)
		}
		if !trustedGuard(e.guardPath()) {
			t.Errorf("protocol %q: guard program %q not trusted", tc.protocol, e.guardPath())
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("protocol %q: the image's descriptor is not close-on-exec (%v)", tc.protocol, err)
		}
	}
	if trustedGuard("/usr/bin/leaderrun") {
		t.Error("a guard program named by path is trusted without its handshake")
	}
}
