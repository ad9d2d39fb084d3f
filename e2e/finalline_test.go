package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// In a log file (`>job.log 2>&1`, `>>job.log`, or stderr alone), leaderrun's
// final line starts on a fresh line after child output without a final
// newline; it stuck to it ("no newlineleaderrun: printf exited …"). Output
// that ends with a newline gets no blank line.
func TestFreshLineInFile(t *testing.T) {
	store := fileStore(t)
	dir := t.TempDir()
	run := func(t *testing.T, stdout, stderr *os.File, script string) {
		t.Helper()
		cmd := exec.Command(lrBin, "--store", store, "--name", "fresh", "--", "sh", "-c", script)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("leaderrun: %v", err)
		}
	}
	open := func(t *testing.T, suffix string, flag int) (*os.File, string) {
		t.Helper()
		path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+suffix)
		f, err := os.OpenFile(path, flag|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, path
	}
	read := func(t *testing.T, path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	const final = "leaderrun: sh exited with code 0; exit 0\n"
	for _, tc := range []struct {
		name   string
		flag   int
		script string
		want   string
	}{
		// One write-only description for both, as `>f 2>&1` gives.
		{"SharedWriteOnly", os.O_WRONLY | os.O_TRUNC, `printf 'no newline'`, "no newline\n" + final},
		{"SharedAppend", os.O_WRONLY | os.O_APPEND, `printf 'no newline'`, "no newline\n" + final},
		{"SharedReadWrite", os.O_RDWR | os.O_TRUNC, `printf 'on stderr' >&2`, "on stderr\n" + final},
		{"EndsWithNewline", os.O_WRONLY | os.O_TRUNC, `printf 'whole line\n'`, "whole line\n" + final},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, path := open(t, "", tc.flag)
			run(t, f, f, tc.script)
			if got := read(t, path); !strings.HasSuffix(got, tc.want) || strings.Contains(got, "\n\n") {
				t.Fatalf("file %q; want it to end with %q and no blank line", got, tc.want)
			}
		})
	}
	// Separate files: only what lands in stderr's file counts.
	t.Run("SeparateFiles", func(t *testing.T) {
		out, _ := open(t, ".out", os.O_WRONLY|os.O_TRUNC)
		errf, errPath := open(t, ".err", os.O_WRONLY|os.O_TRUNC|os.O_APPEND)
		run(t, out, errf, `printf 'to stdout'`)
		got := read(t, errPath)
		lines := strings.Split(got, "\n")
		if strings.Contains(got, "\n\n") || len(lines) != 3 || !strings.HasPrefix(lines[0], "leaderrun: lease fresh acquired ") || lines[1]+"\n" != final {
			t.Fatalf("stderr file %q: the child's stdout went elsewhere, want no blank line", got)
		}
		run(t, out, errf, `printf 'to stderr' >&2`)
		if got := read(t, errPath); !strings.HasSuffix(got, "to stderr\n"+final) {
			t.Fatalf("stderr file %q; want the final line on a fresh line", got)
		}
	})
}

// In a pipe leaderrun cannot see what the child wrote last (the reader has
// it): its lines are written as they are, so output ending with a newline
// gets no blank line (docs/usage.md says what happens without one).
func TestFinalLineInPipe(t *testing.T) {
	cmd := exec.Command(lrBin, "--store", fileStore(t), "--name", "pipe", "--", "sh", "-c", `printf 'whole line\n'`)
	out, err := cmd.CombinedOutput() // one pipe for both
	if err != nil {
		t.Fatalf("leaderrun: %v: %s", err, out)
	}
	if !strings.HasSuffix(string(out), "whole line\nleaderrun: sh exited with code 0; exit 0\n") {
		t.Fatalf("output %q", out)
	}
}
