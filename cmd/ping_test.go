package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/internal/run"
)

// TestPingFormatRefused: a --ping-format that names no format, one
// without --ping, --ping-skipped with a format that has no event for
// it, and a --ping-output-tail without --ping or beyond its range are refused in one line, exit 125, before anything starts, from the
// flag or the variable, and the URL's secret is never printed.
func TestPingFormatRefused(t *testing.T) {
	store := "file://" + t.TempDir()
	const url = "https://uptime.example.com/api/push/S3cr3tT0k3n"
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		says string
	}{
		{"unknown", nil, []string{"--ping", url, "--ping-format", "healthchecks"}, `--ping-format "healthchecks": want auto, hc, kuma, cronitor or betterstack`},
		{"unknown by variable", map[string]string{"LEADERRUN_PING": url, "LEADERRUN_PING_FORMAT": "uptime-kuma"}, nil, `LEADERRUN_PING_FORMAT="uptime-kuma" (--ping-format): want`},
		{"without --ping", nil, []string{"--ping-format", "kuma"}, "--ping-format needs --ping URL"},
		{"skipped, detected kuma", nil, []string{"--ping", url, "--ping-skipped"}, "--ping-skipped: --ping-format kuma has no event that records a line without changing the check's state"},
		{"skipped, cronitor", nil, []string{"--ping", url, "--ping-format", "cronitor", "--ping-skipped"}, "--ping-format cronitor has no event"},
		{"tail without --ping", nil, []string{"--ping-output-tail", "10000"}, "--ping-output-tail needs --ping URL"},
		{"tail too long", nil, []string{"--ping", url, "--ping-output-tail", "100001"}, "--ping-output-tail 100001: want 0 (off) to 100000 bytes"},
		{"tail negative by variable", map[string]string{"LEADERRUN_PING": url, "LEADERRUN_PING_OUTPUT_TAIL": "-1"}, nil, "LEADERRUN_PING_OUTPUT_TAIL=-1 (--ping-output-tail): want 0 (off) to 100000 bytes"},
		{"skipped, betterstack by variable", map[string]string{"LEADERRUN_PING": url, "LEADERRUN_PING_FORMAT": "betterstack", "LEADERRUN_PING_SKIPPED": "true"}, nil, "LEADERRUN_PING_SKIPPED (--ping-skipped): LEADERRUN_PING_FORMAT=betterstack (--ping-format) has no event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"LEADERRUN_STORE": store}
			for k, v := range tc.vars {
				vars[k] = v
			}
			marker := filepath.Join(t.TempDir(), "ran")
			code, out, errOut := runEnv(t, vars, append(tc.args, "--name", "j", "--", "touch", marker)...)
			line := oneLineOf(t, errOut)
			if code != run.ExitFailure || !strings.Contains(line, tc.says) || out != "" {
				t.Fatalf("exit %d, stderr %q; want 125 saying %q", code, errOut, tc.says)
			}
			if strings.Contains(errOut, "S3cr3t") {
				t.Errorf("the URL's secret was printed: %q", errOut)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child ran")
			}
		})
	}
}
