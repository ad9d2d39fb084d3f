package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/helptext"
	"github.com/leaderrun/leaderrun/internal/ptytest"
	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

var update = flag.Bool("update", false, "rewrite golden files")

// runCapture runs the CLI in-process with files for stdout and stderr.
func runCapture(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	out, _ := os.Create(filepath.Join(dir, "out"))
	errf, _ := os.Create(filepath.Join(dir, "err"))
	defer out.Close()
	defer errf.Close()
	code := invoke(context.Background(), append([]string{"leaderrun"}, args...), env{
		stdio: Stdio{In: os.Stdin, Out: out, Err: errf},
		vars:  testEnviron(map[string]string{"NO_COLOR": "1"}),
	})
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	return code, string(o), string(e)
}

// testEnviron is this process's environment without its LEADERRUN_*
// variables (the test harness's own, such as LEADERRUN_TEST_REDIS_URL), with
// vars set: what a command under test reads.
func testEnviron(vars map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEADERRUN_") {
			out = append(out, kv)
		}
	}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

func TestHelpGolden(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		golden string
	}{
		{[]string{"--help"}, "help.golden"},
		{[]string{"help", "status"}, "help-status.golden"},
		{[]string{"help", "watch"}, "help-watch.golden"},
		{[]string{"help", "history"}, "help-history.golden"},
		{[]string{"help", "check"}, "help-check.golden"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			code, out, errOut := runCapture(t, tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("%v: exit %d, stderr %q", tc.args, code, errOut)
			}
			golden := filepath.Join("..", "testdata", tc.golden)
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./cmd -update to create it)", err)
			}
			if out != string(want) {
				t.Fatalf("%v differs from %s (go test ./cmd -update after checking):\n%s", tc.args, golden, out)
			}
			checkHelpText(t, out)
		})
	}
	_, out, _ := runCapture(t, "--help")
	for _, f := range []string{"--store", "--wait", "--ttl", "--renew-every", "--grace", "--stop-signal", "--holder", "--conflict-exit-code", "--log-format", "LEADERRUN_TTL", "Examples:", "file:///", "redis://", "postgres://", "etcd://", "azblob://"} {
		if !strings.Contains(out, f) {
			t.Errorf("--help does not mention %s", f)
		}
	}
}

func TestParseWait(t *testing.T) {
	for in, want := range map[string]time.Duration{"forever": lease.WaitForever, "0": 0, "30s": 30 * time.Second, "10m": 10 * time.Minute, "inf": lease.WaitForever} {
		if got, err := parseWait(in, lease.DashFlag); err != nil || got != want {
			t.Errorf("parseWait(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "soon", "-5s", "10"} {
		if _, err := parseWait(bad, lease.DashFlag); err == nil {
			t.Errorf("parseWait(%q) accepted", bad)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "sigint": syscall.SIGINT, "HUP": syscall.SIGHUP, "10": syscall.SIGUSR1, "SIGQUIT": syscall.SIGQUIT} {
		if got, err := parseSignal(in, lease.DashFlag); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"KILL", "STOP", "9", "0", "FOO", "99"} {
		if _, err := parseSignal(bad, lease.DashFlag); err == nil {
			t.Errorf("parseSignal(%q) accepted", bad)
		}
	}
}

func TestSecretNeverPrintedForUnknownScheme(t *testing.T) {
	code, _, errOut := runCapture(t, "--store", "bogus://u:hunter2@host", "--", "true")
	if code != run.ExitFailure || strings.Contains(errOut, "hunter2") {
		t.Fatalf("exit %d, stderr %q: want 125 without the password", code, errOut)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		code int
	}{
		{fmt.Errorf("x: %w", runner.ErrNotFound), run.ExitNotFound},
		{fmt.Errorf("x: %w", runner.ErrNotExecutable), run.ExitNotExecutable},
		{fmt.Errorf("x: %w", lease.ErrUnsafeTiming), run.ExitFailure},
		{fmt.Errorf("x: %w", lease.ErrUnavailable), run.ExitFailure},
		{usagef("bad"), run.ExitFailure},
		{errors.New("anything"), run.ExitFailure},
		{newOutcome(42, 0, "custom"), 42},
	}
	for _, tc := range tests {
		if got := classify(tc.err).code; got != tc.code {
			t.Errorf("classify(%v) = %d; want %d", tc.err, got, tc.code)
		}
	}
}

// `leaderrun -- status` runs a program called status; it is not the subcommand.
func TestDashDashIsNeverASubcommand(t *testing.T) {
	code, _, errOut := runCapture(t, "--store", "file://"+t.TempDir(), "--", "status", "x")
	if code != run.ExitNotFound || !strings.Contains(errOut, "not found") {
		t.Fatalf("exit %d, stderr %q; want 127: `status` looked up as a command", code, errOut)
	}
}

// --help wraps to the terminal's width, and to 80 columns when its output is
// not a terminal.
func TestHelpWidth(t *testing.T) {
	_, slave := ptytest.Open(t)
	for _, cols := range []uint16{60, 132} {
		if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
			t.Fatal(err)
		}
		if w := helptext.Width(slave); w != int(cols) {
			t.Errorf("a terminal %d columns wide: help width %d", cols, w)
		}
	}
	f, err := os.CreateTemp(t.TempDir(), "help")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := helptext.Width(f); w != helptext.DefaultWidth {
		t.Errorf("a file: help width %d; want %d", w, helptext.DefaultWidth)
	}
	_, out, _ := runCapture(t, "--help")
	for i, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > helptext.DefaultWidth {
			t.Errorf("--help line %d is %d columns: %q", i+1, n, l)
		}
	}
}

// wrapHelp keeps every word, in order, and no line is longer than the width
// unless it is one word; continued example comments stay comments and
// continued example commands end in a backslash.
func TestWrapHelp(t *testing.T) {
	_, out, _ := runCapture(t, "--help")
	unwrapped := wrapHelp(out, 1<<20) // already wrapped at 80: words are what count
	words := func(s string) []string {
		var w []string
		for _, f := range strings.Fields(s) {
			if f != `\` && f != "#" {
				w = append(w, f)
			}
		}
		return w
	}
	for _, width := range []int{40, 60, 100, 200} {
		got := wrapHelp(unwrapped, width)
		if !slices.Equal(words(got), words(unwrapped)) {
			t.Errorf("width %d: the words changed", width)
		}
		for _, l := range strings.Split(got, "\n") {
			if len([]rune(l)) > width && len(strings.Fields(l)) > 1 {
				t.Errorf("width %d: line %q is %d columns", width, l, len([]rune(l)))
			}
		}
	}
	got := wrapHelp("      # "+strings.Repeat("word ", 20)+"\n      leaderrun "+strings.Repeat("--flag ", 20), 40)
	for _, l := range strings.Split(got, "\n") {
		if t2 := strings.TrimSpace(l); !strings.HasPrefix(t2, "#") && !strings.HasPrefix(t2, "leaderrun") && !strings.HasPrefix(t2, "--flag") {
			t.Errorf("%q: neither a comment nor part of the command", l)
		}
	}
	lines := strings.Split(got, "\n")
	for i, l := range lines[1:] {
		if strings.HasPrefix(strings.TrimSpace(l), "--flag") && !strings.HasSuffix(lines[i], ` \`) {
			t.Errorf("%q continues the example command, but %q does not end in a backslash", l, lines[i])
		}
	}
}

// --help is wrapped once, to the width of its output: the hand wrapping of
// the texts in the source does not show (no line broken while the next word
// would have fit), NAME continues under its text without a shell
// backslash, and only example commands end in one.
func TestHelpWrappedOnce(t *testing.T) {
	check := func(t *testing.T, out string, width int) {
		t.Helper()
		lines := strings.Split(out, "\n")
		indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
		section := ""
		for i, l := range lines {
			trimmed := strings.TrimSpace(l)
			if l != "" && l[0] != ' ' {
				section = l
			}
			command := strings.HasPrefix(trimmed, "leaderrun ") || i > 0 && strings.HasSuffix(lines[i-1], ` \`)
			if strings.HasSuffix(l, ` \`) && !command || isNameLine(trimmed) && strings.HasSuffix(l, `\`) {
				t.Errorf("width %d: %q ends in a backslash but is no example command", width, l)
			}
			if i == 0 || trimmed == "" || strings.TrimSpace(lines[i-1]) == "" || indent(l) != indent(lines[i-1]) {
				continue
			}
			// Prose: the description's paragraphs, and the continuation
			// lines of a row (a flag's, a command's, NAME's); not the rows
			// themselves, examples or output formats.
			if section == "DESCRIPTION:" && indent(l) != 3 || section != "DESCRIPTION:" && indent(l) <= 6 {
				continue
			}
			prev := lines[i-1]
			if strings.HasSuffix(prev, ".") || strings.HasSuffix(prev, ":") || strings.HasSuffix(prev, `\`) {
				continue // a line of its own, or a command's continuation
			}
			if first := strings.Fields(l)[0]; len([]rune(prev))+1+len([]rune(first)) <= width {
				t.Errorf("width %d: line %d broken early: %q, then %q", width, i, prev, l)
			}
		}
	}
	for _, args := range [][]string{{"--help"}, {"help", "status"}, {"help", "watch"}, {"help", "history"}, {"help", "check"}} {
		_, out, _ := runCapture(t, args...)
		check(t, out, helptext.DefaultWidth)
	}
	app := DocApp()
	for _, width := range []int{60, 100, 132} {
		var b strings.Builder
		cli.HelpPrinterCustom(&b, cli.AppHelpTemplate, app, nil)
		check(t, wrapHelp(b.String(), width), width)
		for _, c := range app.Commands {
			b.Reset()
			cli.HelpPrinterCustom(&b, cli.CommandHelpTemplate, c, nil)
			check(t, wrapHelp(b.String(), width), width)
		}
	}
}
