package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

func TestOncePerRefused(t *testing.T) {
	store := "file://" + t.TempDir()
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		says string
	}{
		{"not a period", nil, []string{"--once-per", "fortnight"}, `--once-per "fortnight": want hour, day, week or month, or a duration from 1s`},
		{"too short", nil, []string{"--once-per", "500ms"}, `--once-per "500ms": want`},
		{"no history", nil, []string{"--once-per", "day", "--history-keep", "0"}, "--once-per reads the run history, and --history-keep 0 records none"},
		{"no history by variable", map[string]string{"LEADERRUN_HISTORY_KEEP": "0", "LEADERRUN_ONCE_PER": "day"}, nil, "--history-keep 0 records none"},
		{"unknown zone", nil, []string{"--once-per", "day", "--once-per-zone", "Mars/Olympus"}, `--once-per-zone "Mars/Olympus": want an IANA time zone name`},
		{"zone with a duration", nil, []string{"--once-per", "6h", "--once-per-zone", "Europe/Berlin"}, "--once-per-zone Europe/Berlin applies to hour, day, week and month"},
		{"exit code", nil, []string{"--once-per", "day", "--once-per-exit-code", "300"}, "--once-per-exit-code 300: want 0-255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"LEADERRUN_STORE": store}
			for k, v := range tc.vars {
				vars[k] = v
			}
			marker := filepath.Join(t.TempDir(), "ran")
			code, out, errOut := runEnv(t, vars, append(tc.args, "--name", "j", "--", "touch", marker)...)
			line := oneLineOf(t, errOut)
			if code != ExitFailure || !strings.Contains(line, tc.says) || out != "" {
				t.Fatalf("exit %d, stderr %q; want 125 saying %q", code, errOut, tc.says)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child ran")
			}
		})
	}
}

// runsOf reads the run history of name in the file store dir.
func runsOf(t *testing.T, dir, name string) []lease.Run {
	t.Helper()
	s, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.Runs(context.Background(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestOncePerFileStore: in one period (a year long, so that no boundary
// falls between the runs), a failed run does not make the period done, a
// successful one does: later runs release the lease without starting
// COMMAND, record no run, and exit --once-per-exit-code (0 by default);
// --once-per-any counts the failed run.
func TestOncePerFileStore(t *testing.T) {
	dir := t.TempDir()
	marks := t.TempDir()
	p, _ := lease.ParsePeriod("8784h", nil)
	if _, end := p.Bounds(time.Now()); time.Until(end) < time.Minute {
		t.Skip("a period boundary is due within a minute")
	}
	vars := map[string]string{"LEADERRUN_STORE": "file://" + dir}
	run := func(mark string, code int, extra ...string) (int, string) {
		t.Helper()
		args := append([]string{"--once-per", "8784h", "--name", "job"}, extra...)
		args = append(args, "--", "sh", "-c", "touch \"$0\"; exit \"$1\"", filepath.Join(marks, mark), string(rune('0'+code)))
		c, _, errOut := runEnv(t, vars, args...)
		return c, errOut
	}
	ran := func(mark string) bool { _, err := os.Stat(filepath.Join(marks, mark)); return err == nil }

	if c, errOut := run("fail", 3); c != 3 || !ran("fail") {
		t.Fatalf("first run: exit %d, ran %v; want 3 and a run: %s", c, ran("fail"), errOut)
	}
	if c, errOut := run("any", 0, "--once-per-any"); c != 0 || ran("any") || !strings.Contains(errOut, "ended failed (exit 3)") {
		t.Fatalf("--once-per-any after a failed run: exit %d, ran %v; want 0 and no run: %s", c, ran("any"), errOut)
	}
	if c, errOut := run("ok", 0); c != 0 || !ran("ok") || !strings.Contains(errOut, "no successful run yet this 8784h period") {
		t.Fatalf("after a failed run: exit %d, ran %v; want a run: %s", c, ran("ok"), errOut)
	}
	c, errOut := run("again", 0)
	if c != 0 || ran("again") || !strings.Contains(errOut, "already done this 8784h period") || !strings.Contains(errOut, "sh not started") {
		t.Fatalf("after a successful run: exit %d, ran %v; want 0 and no run: %s", c, ran("again"), errOut)
	}
	if c, errOut := run("code", 0, "--once-per-exit-code", "9"); c != 9 || ran("code") {
		t.Fatalf("--once-per-exit-code 9: exit %d, ran %v: %s", c, ran("code"), errOut)
	}
	runs := runsOf(t, dir, "job")
	if len(runs) != 2 || runs[0].Outcome != lease.OutcomeOK || runs[1].Outcome != lease.OutcomeFailed {
		t.Fatalf("history %+v; want the failed run and the successful one, nothing for the runs not needed", runs)
	}
	if s, _ := filelease.Open(dir); s != nil {
		defer s.Close()
		if h, err := s.Status(context.Background(), "job"); err != nil || h != nil {
			t.Fatalf("status after a run not needed: %+v, %v; want the lease free", h, err)
		}
	}
}
