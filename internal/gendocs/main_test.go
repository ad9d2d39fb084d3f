package main

import (
	"os"
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
	for _, golden := range []string{"help.golden", "help-status.golden", "help-watch.golden"} {
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
	for _, sub := range []string{"status", "watch"} {
		for _, name := range []string{"leaderrun.1", "leaderrun.bash", "_leaderrun", "leaderrun.fish"} {
			if !strings.Contains(read(name), sub) {
				t.Errorf("%s lacks the %s command", name, sub)
			}
		}
	}
}
