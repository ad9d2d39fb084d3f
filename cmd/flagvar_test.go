package cmd

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/internal/run"
)

// TestBadVariableNamedAsSet: a bad value read from a flag's variable is
// reported under the variable the user set (LEADERRUN_PING=bad: "LEADERRUN_PING
// (--ping): …"), and the same value given as the flag under the flag, for
// every flag that has a variable. A flag added with a variable and no row
// here fails the test.
func TestBadVariableNamedAsSet(t *testing.T) {
	hc := []string{"--health-cmd", "true"}
	daily := []string{"--once-per", "day"}
	rows := map[string]struct {
		bad   string   // a value refused; "" when none is, alone, from a variable
		extra []string // flags that make the value's check apply
		form  []string // the subcommand and NAME, or nil for the run form
	}{
		"store":               {bad: "bogus://x"},
		"log-format":          {bad: "xml"},
		"quiet":               {bad: "maybe"},
		"verbose":             {bad: "maybe"},
		"name":                {bad: "a b"},
		"wait":                {bad: "soon"},
		"no-wait":             {bad: "maybe"},
		"ttl":                 {bad: "0s"},
		"renew-every":         {bad: "-1s"},
		"grace":               {bad: "-1s"},
		"call-timeout":        {bad: "1ms"},
		"stop-signal":         {bad: "KILL"},
		"health-cmd":          {}, // only a blank command is refused, and a blank variable is an unset one
		"health-interval":     {bad: "1ms", extra: hc},
		"health-timeout":      {bad: "0s", extra: hc},
		"health-retries":      {bad: "0", extra: hc},
		"health-start-period": {bad: "-1s", extra: hc},
		"hold-at-least":       {bad: "-1s"},
		"once-per":            {bad: "fortnight"},
		"once-per-zone":       {bad: "Mars/Olympus", extra: daily},
		"once-per-deadline":   {bad: "0s", extra: daily},
		"once-within":         {bad: "1ms"},
		"once-per-any":        {bad: "true"}, // without --once-per
		"once-per-exit-code":  {bad: "300", extra: daily},
		"history-keep":        {bad: "-1"},
		"holder":              {bad: "a\u2028b"},
		"contain":             {bad: "box"},
		"pass-env":            {bad: "FOO"},
		"priority":            {bad: "2000000"},
		"priority-step":       {bad: "2m"},
		"slots":               {bad: "0"},
		"conflict-exit-code":  {bad: "300"},
		"ping":                {bad: "ftp://hc.example/x"},
		"ping-format":         {bad: "zz", extra: []string{"--ping", "https://hc-ping.com/x"}},
		"ping-skipped":        {bad: "true"}, // without --ping
		"ping-output-tail":    {bad: "-1", extra: []string{"--ping", "https://hc-ping.com/x"}},
		"metrics-file":        {bad: "/nonexistent-leaderrun-dir/x.prom"},
		"pod-label":           {bad: "nolabel"},
		"listen":              {bad: "nohostport"},
		"interval":            {bad: "1ms", form: []string{"watch", "x"}},
	}
	var all []cli.Flag
	for _, c := range commands {
		all = append(all, c.flags(&options{})...)
	}
	seen := map[string]bool{}
	for _, f := range all {
		name := f.Names()[0]
		v := envOf(name)
		if v == "" || seen[name] {
			continue
		}
		seen[name] = true
		row, ok := rows[name]
		if !ok {
			t.Errorf("--%s has the variable %s but no row in this test", name, v)
			continue
		}
		if row.bad == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			store := []string{"--store", "file://" + t.TempDir()}
			if name == "store" {
				store = nil
			}
			tail := []string{"--", "true"}
			if row.form != nil {
				tail = row.form
			}
			flagForm := dashes(name)
			// From the variable: named as the variable, before any mention
			// of the flag (which may follow in parentheses).
			code, _, errOut := runEnv(t, map[string]string{v: row.bad}, slices.Concat(store, row.extra, tail)...)
			line := oneLineOf(t, errOut)
			at, flagAt := strings.Index(line, v), mentions(line, flagForm)
			if code != run.ExitFailure || at < 0 || (flagAt >= 0 && flagAt < at) {
				t.Errorf("%s=%q: exit %d, %q; want 125 naming %s before %s", v, row.bad, code, line, v, flagForm)
			}
			// The same value as the flag: named as the flag.
			code, _, errOut = runEnv(t, nil, slices.Concat(store, row.extra, []string{flagForm + "=" + row.bad}, tail)...)
			line = oneLineOf(t, errOut)
			if code != run.ExitFailure || mentions(line, flagForm) < 0 || strings.Contains(line, v) {
				t.Errorf("%s=%q: exit %d, %q; want 125 naming %s, not %s", flagForm, row.bad, code, line, flagForm, v)
			}
		})
	}
}

// mentions returns where line names the flag f ("--ping", not as the start
// of "--ping-format"), or -1.
func mentions(line, f string) int {
	for i := 0; ; {
		j := strings.Index(line[i:], f)
		if j < 0 {
			return -1
		}
		end := i + j + len(f)
		if end == len(line) || line[end] != '-' && !('a' <= line[end] && line[end] <= 'z') {
			return i + j
		}
		i = end
	}
}
