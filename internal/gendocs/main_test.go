package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/cmd"
)

// The man page and every completion offer each flag that --help lists
// (testdata's help goldens are --help's output), and the subcommands.
func TestDocsCoverHelp(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir, cmd.DocApp()); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	flagRE := regexp.MustCompile(`(?m)^ {3}--([a-z-]+)`)
	for _, golden := range []string{"help.golden", "help-status.golden", "help-watch.golden", "help-history.golden", "help-check.golden"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", golden))
		if err != nil {
			t.Fatal(err)
		}
		flags := flagRE.FindAllStringSubmatch(string(b), -1)
		if len(flags) < 3 {
			t.Fatalf("%s: found only %d flags", golden, len(flags))
		}
		for _, m := range flags {
			f := m[1]
			for name, want := range map[string]string{
				"leaderrun.1":    `\-\-` + f,
				"leaderrun.bash": "",
				"_leaderrun":     "'--" + f + "[",
				"leaderrun.fish": "-l " + f + " ",
			} {
				ok := strings.Contains(read(name), want) || name == "leaderrun.1" && strings.Contains(read(name), "--"+f)
				if name == "leaderrun.bash" {
					ok = regexp.MustCompile(`[\s']--` + f + `[\s']`).MatchString(read(name))
				}
				if !ok {
					t.Errorf("%s (from %s) lacks --%s", name, golden, f)
				}
			}
		}
	}
	for _, v := range []string{"LEADERRUN_STORE", "LEADERRUN_TTL", "LEADERRUN_WATCH_INTERVAL"} {
		if !strings.Contains(read("leaderrun.1"), ".B "+v+"\n") {
			t.Errorf("leaderrun.1's ENVIRONMENT lacks %s", v)
		}
	}
	for _, sub := range []string{"status", "watch", "history", "check"} {
		for _, name := range []string{"leaderrun.1", "leaderrun.bash", "_leaderrun", "leaderrun.fish"} {
			if !strings.Contains(read(name), sub) {
				t.Errorf("%s lacks the %s command", name, sub)
			}
		}
	}
}

// The completions parse in their shells, and fish's completes `--st` (bash's
// is driven by e2e's package test). A shell that is not installed is
// reported, and under CI (where scripts/test.sh installs them) a failure.
func TestCompletionsRun(t *testing.T) {
	dir := t.TempDir()
	if err := write(dir, cmd.DocApp()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ shell, file string }{{"bash", "leaderrun.bash"}, {"zsh", "_leaderrun"}, {"fish", "leaderrun.fish"}} {
		sh, err := exec.LookPath(c.shell)
		if err != nil {
			if os.Getenv("CI") != "" { // scripts/test.sh installs every shell
				t.Fatalf("%s not installed: %s cannot be checked", c.shell, c.file)
			}
			t.Logf("%s not installed: %s is not checked", c.shell, c.file)
			continue
		}
		if out, err := exec.Command(sh, "-n", filepath.Join(dir, c.file)).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", c.shell, c.file, err, out)
		}
		if c.shell == "fish" {
			out, err := exec.Command(sh, "-c", "source "+filepath.Join(dir, c.file)+"; complete -C 'leaderrun --st'").Output()
			if err != nil || !strings.Contains(string(out), "--store\t") || !strings.Contains(string(out), "--stop-signal\t") {
				t.Errorf("fish: leaderrun --st<TAB>: %v\n%s", err, out)
			}
		}
	}
}
