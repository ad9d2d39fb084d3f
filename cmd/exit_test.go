package cmd

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/internal/stderrlog"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// The final line has one shape whatever ended the run: what happened, then
// "; exit N" in text; the same words and an exit_code field in JSON. It
// had five ("…; exit 130", "(exit 75)", "exit_code=130", "exit 123
// lease=h", "(see leaderrun --help) exit_code=125").
func TestFinalLineShape(t *testing.T) {
	store := "file://" + t.TempDir()
	s := &leasetest.MemStore{}
	useStore(t, "shape", s)
	take(t, s, "held", "first")
	for _, tc := range []struct {
		name string
		code int
		args []string
	}{
		{"Exited", 1, []string{"--store", store, "--name", "shape", "--", "false"}},
		{"Signaled", 128 + int(syscall.SIGTERM), []string{"--store", store, "--name", "shape", "--", "sh", "-c", "kill -TERM $$"}},
		{"Usage", run.ExitFailure, []string{"--store", store, "--bogus"}},
		{"NotFound", run.ExitNotFound, []string{"--store", store, "--name", "shape", "--", "no-such-command-here"}},
		{"Conflict", run.ExitConflict, []string{"--store", "shape://", "--name", "held", "--wait", "0", "--", "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCapture(t, tc.args...)
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			last := lines[len(lines)-1]
			re := regexp.MustCompile(`^leaderrun: (.+); exit (\d+)$`)
			m := re.FindStringSubmatch(last)
			if code != tc.code || m == nil || m[2] != strconv.Itoa(code) || strings.Contains(m[1], "exit_code") || regexp.MustCompile(`\bexit \d`).MatchString(m[1]) {
				t.Fatalf("exit %d, final line %q; want %d and \"leaderrun: WHAT; exit %d\"", code, last, tc.code, tc.code)
			}
			code, _, errOut = runCapture(t, append([]string{"--log-format", "json"}, tc.args...)...)
			lines = strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			var rec struct {
				Msg      string `json:"msg"`
				Event    string `json:"event"`
				ExitCode *int   `json:"exit_code"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
				t.Fatalf("JSON final line %q: %v", lines[len(lines)-1], err)
			}
			if code != tc.code || rec.ExitCode == nil || *rec.ExitCode != code || rec.Msg != m[1] || rec.Event == "" {
				t.Fatalf("exit %d, JSON final line %q; want msg %q, an event and exit_code %d", code, lines[len(lines)-1], m[1], tc.code)
			}
		})
	}
}

// -v names signals as the messages do (SIGTERM), in both formats, never
// with Go's names ("terminated", "user defined signal 1") or a number.
func TestLogSignalNames(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var b strings.Builder
		log, err := stderrlog.New(&b, format, slog.LevelDebug, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("forwarding signal", "pid", 1, "signal", syscall.SIGUSR1)
		log.Debug("child exited", "code", 0, "signal", syscall.Signal(0))
		var sig os.Signal = syscall.SIGTERM
		log.Debug("ignored", "signal", sig)
		got := b.String()
		for _, want := range []string{"SIGUSR1", "SIGTERM"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: %q lacks %s", format, got, want)
			}
		}
		for _, bad := range []string{"user defined", "terminated", "signal 0", `"signal":0`, `"signal":10`} {
			if strings.Contains(got, bad) {
				t.Errorf("%s: %q has %q", format, got, bad)
			}
		}
	}
}

// status tells a lease the store knows nothing of (a name never used with
// it, or mistyped) from a free one that ran: both read "free" (exit 3).
func TestStatusNothingKnown(t *testing.T) {
	store := "file://" + t.TempDir()
	code, out, _ := runCapture(t, "status", "--store", store, "job")
	if code != ExitStatusUnknown || !strings.HasPrefix(out, "job: nothing known (") {
		t.Fatalf("never used: exit %d, %q; want %d, nothing known", code, out, ExitStatusUnknown)
	}
	code, out, _ = runCapture(t, "status", "--json", "--store", store, "job")
	if code != ExitStatusUnknown || out != `{"name":"job","held":false,"unknown":true}`+"\n" {
		t.Fatalf("never used, --json: exit %d, %q", code, out)
	}
	if code, _, errOut := runCapture(t, "--store", store, "--name", "job", "--", "true"); code != 0 {
		t.Fatalf("run: exit %d, %s", code, errOut)
	}
	code, out, _ = runCapture(t, "status", "--store", store, "job")
	if code != ExitStatusFree || !strings.HasPrefix(out, "job: free\n  last run: ") {
		t.Fatalf("after a run: exit %d, %q; want %d, free and the last run", code, out, ExitStatusFree)
	}
	code, out, _ = runCapture(t, "status", "--json", "--store", store, "job")
	if code != ExitStatusFree || strings.Contains(out, "unknown") {
		t.Fatalf("after a run, --json: exit %d, %q", code, out)
	}
}
