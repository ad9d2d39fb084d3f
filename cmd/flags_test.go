package cmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

// runEnv runs the CLI in-process with the given variables as its whole
// environment (plus NO_COLOR) and a bound on how long it may take.
func runEnv(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	out, _ := os.Create(filepath.Join(dir, "out"))
	errf, _ := os.Create(filepath.Join(dir, "err"))
	defer out.Close()
	defer errf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := invoke(ctx, append([]string{"leaderrun"}, args...), env{
		stdio: Stdio{In: os.Stdin, Out: out, Err: errf},
		vars:  append(testEnviron(vars), "NO_COLOR=1"),
	})
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	return code, string(o), string(e)
}

// holdLease takes name in a fresh file store for the rest of the test and
// returns the store's URL.
func holdLease(t *testing.T, name, holder string) string {
	t.Helper()
	dir := t.TempDir()
	s, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(context.Background(), lease.Request{Name: name, Label: holder, ID: lease.NewID(), TTL: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Release(context.Background())
		s.Close()
	})
	return "file://" + dir
}

func oneLineOf(t *testing.T, stderr string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("stderr has %d lines; want one: %q", len(lines), stderr)
	}
	return lines[0]
}

// A flag means the same before the subcommand, after it,
// and after NAME.
func TestSubcommandFlagsAnywhere(t *testing.T) {
	held := holdLease(t, "report", "h1")
	free := "file://" + t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"store before status", []string{"--store", held, "status", "report"}, 0, "held by h1"},
		{"store= before status", []string{"--store=" + held, "status", "report"}, 0, "held by h1"},
		{"store after status", []string{"status", "--store", held, "report"}, 0, "held by h1"},
		{"store after NAME", []string{"status", "report", "--store", held}, 0, "held by h1"},
		{"json after NAME", []string{"status", "report", "--store", held, "--json"}, 0, `"held":true`},
		{"json before status", []string{"--json", "--store", held, "status", "report"}, 0, `"held":true`},
		{"last of two wins", []string{"--store", free, "status", "report", "--store", held}, 0, "held by h1"},
		{"empty store after NAME", []string{"status", "report", "--store", free}, ExitStatusUnknown, "report: nothing known"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runEnv(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errOut, tc.code, tc.out)
			}
		})
	}
}

// Flags of another form, unknown flags and extra arguments are refused with
// one line that says what to do; the log format applies wherever it is.
func TestSubcommandRefusals(t *testing.T) {
	store := "file://" + t.TempDir()
	tests := []struct {
		name string
		args []string
		says string
	}{
		{"run flag before status", []string{"--ttl", "5s", "status", "x"}, "status does not take --ttl"},
		{"run flag after NAME", []string{"status", "x", "--wait", "0"}, "status does not take --wait"},
		{"watch flag on status", []string{"status", "--interval", "1s", "x"}, "it is a flag of watch"},
		{"unknown flag on status", []string{"status", "x", "--jsn"}, "did you mean --json?"},
		{"two names", []string{"status", "a", "b"}, "got 2: a b"},
		{"no name", []string{"status"}, "status needs a lease NAME"},
		{"command after --", []string{"status", "x", "--", "true"}, "not a command after --"},
		{"flag without value after NAME", []string{"status", "x", "--store"}, "--store needs a value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": store}, tc.args...)
			line := oneLineOf(t, errOut)
			if code != run.ExitFailure || !strings.Contains(line, tc.says) || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 125 saying %q", code, out, errOut, tc.says)
			}
		})
	}
}

// A usage error honours --log-format and
// LEADERRUN_LOG_FORMAT wherever they are given: one JSON object with
// exit_code.
func TestUsageErrorsHonourLogFormat(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		args []string
		json bool
	}{
		{"flag before the bad flag", nil, []string{"--log-format", "json", "--tll", "5s", "--", "true"}, true},
		{"flag after the bad flag", nil, []string{"--tll", "5s", "--log-format=json", "--", "true"}, true},
		{"variable", map[string]string{"LEADERRUN_LOG_FORMAT": "json"}, []string{"--ttl", "5", "--", "true"}, true},
		{"flag beats variable", map[string]string{"LEADERRUN_LOG_FORMAT": "json"}, []string{"--log-format", "text", "--ttl", "5", "--", "true"}, false},
		{"before status, error after NAME", nil, []string{"--log-format", "json", "status", "x", "--ttl", "5s"}, true},
		{"after NAME, error before status", nil, []string{"--ttl", "5s", "status", "x", "--log-format", "json"}, true},
		{"found by runConfig", nil, []string{"--log-format", "json", "--stop-signal", "KILL", "--", "true"}, true},
		{"no command", nil, []string{"--log-format", "json"}, true},
		{"bad variable", map[string]string{"LEADERRUN_LOG_FORMAT": "json", "LEADERRUN_QUIET": "maybe"}, []string{"--", "true"}, true},
		{"invalid format falls back to text", nil, []string{"--log-format", "xml", "--", "true"}, false},
		{"invalid flag beats valid variable", map[string]string{"LEADERRUN_LOG_FORMAT": "json"}, []string{"--log-format", "xml", "--", "true"}, false},
		{"invalid variable", map[string]string{"LEADERRUN_LOG_FORMAT": "xml"}, []string{"--", "true"}, false},
		{"text by default", nil, []string{"--tll", "5s", "--", "true"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runEnv(t, tc.vars, tc.args...)
			line := oneLineOf(t, errOut)
			if code != run.ExitFailure {
				t.Fatalf("exit %d; want 125 (stderr %q)", code, errOut)
			}
			var obj map[string]any
			err := json.Unmarshal([]byte(line), &obj)
			if !tc.json {
				if err == nil || !strings.HasPrefix(line, "leaderrun: ") {
					t.Fatalf("stderr %q; want a text line", line)
				}
				return
			}
			if err != nil {
				t.Fatalf("stderr %q is not one JSON object: %v", line, err)
			}
			if obj["exit_code"] != float64(run.ExitFailure) || obj["level"] != "ERROR" || obj["msg"] == "" {
				t.Fatalf("JSON line %q lacks exit_code 125, level or msg", line)
			}
		})
	}
}

// A flag on the command line wins over any variable, also
// over the variable of a related flag; related flags that contradict each
// other at the same level are refused. Checked for every flag that has a
// variable, through the same takeEnv/preparse/applyEnv path run uses.
func TestFlagBeatsVariableForEveryFlag(t *testing.T) {
	// Two valid values per kind: one for the flag, one for the variable.
	sample := map[flagKind][2]string{
		kindBool:     {"false", "true"},
		kindString:   {"from-flag", "from-env"},
		kindDuration: {"7s", "9s"},
		kindWait:     {"7s", "9s"},
		kindInt:      {"7", "9"},
	}
	forms := map[string]func(*options) []cli.Flag{"": runFlags, "status": statusFlags, "watch": watchFlags}
	for form, flags := range forms {
		for _, f := range takeEnv(flags(&options{})) {
			name := f.Names()[0]
			envName := envOf(name)
			if envName == "" {
				continue
			}
			k := kindOf(f)
			t.Run(strings.TrimSpace(form+" "+name), func(t *testing.T) {
				vals := sample[k]
				vars := map[string]string{envName: vals[1]}
				args := []string{"--" + name + "=" + vals[0]}
				got := probeFlags(t, form, flags, args, vars)
				if got.err != nil {
					t.Fatalf("%v", got.err)
				}
				if got.values[name] != vals[0] {
					t.Fatalf("--%s=%s with %s=%s gives %q; want the flag's value", name, vals[0], envName, vals[1], got.values[name])
				}
				// Without the flag, the variable applies.
				got = probeFlags(t, form, flags, nil, vars)
				if got.err != nil || got.values[name] != vals[1] {
					t.Fatalf("%s=%s alone gives %q, %v; want the variable's value", envName, vals[1], got.values[name], got.err)
				}
			})
		}
	}
}

func TestRelatedFlagsPrecedence(t *testing.T) {
	flags := runFlags
	tests := []struct {
		name   string
		args   []string
		vars   map[string]string
		want   map[string]string // flag → value after applyEnv
		errHas string
	}{
		{"--wait beats LEADERRUN_NO_WAIT", []string{"--wait", "2s"}, map[string]string{"LEADERRUN_NO_WAIT": "1"}, map[string]string{"wait": "2s", "no-wait": "false"}, ""},
		{"-n beats LEADERRUN_WAIT", []string{"-n"}, map[string]string{"LEADERRUN_WAIT": "10m"}, map[string]string{"wait": "forever", "no-wait": "true"}, ""},
		{"-n with --wait 0 agrees", []string{"-n", "--wait", "0"}, nil, map[string]string{"no-wait": "true"}, ""},
		{"-n --wait 2s contradict", []string{"-n", "--wait", "2s"}, nil, nil, "--no-wait and --wait 2s contradict"},
		{"--wait 2s -n contradict", []string{"--wait", "2s", "-n"}, nil, nil, "contradict"},
		{"variables contradict", nil, map[string]string{"LEADERRUN_NO_WAIT": "yes", "LEADERRUN_WAIT": "2s"}, nil, "LEADERRUN_NO_WAIT=yes and LEADERRUN_WAIT=2s contradict"},
		{"-v beats LEADERRUN_QUIET", []string{"-v"}, map[string]string{"LEADERRUN_QUIET": "on"}, map[string]string{"verbose": "true", "quiet": "false"}, ""},
		{"-q beats LEADERRUN_VERBOSE", []string{"-q"}, map[string]string{"LEADERRUN_VERBOSE": "on"}, map[string]string{"verbose": "false", "quiet": "true"}, ""},
		{"-q -v contradict", []string{"-q", "-v"}, nil, nil, "--quiet and --verbose contradict"},
		{"quiet and verbose variables contradict", nil, map[string]string{"LEADERRUN_QUIET": "1", "LEADERRUN_VERBOSE": "1"}, nil, "contradict"},
		{"same flag twice: last wins", []string{"--ttl", "5s", "--ttl", "6s"}, nil, map[string]string{"ttl": "6s"}, ""},
		{"empty variable is unset", nil, map[string]string{"LEADERRUN_NAME": "", "LEADERRUN_TTL": " "}, map[string]string{"name": "", "ttl": "15s"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := probeFlags(t, "", flags, tc.args, tc.vars)
			if tc.errHas != "" {
				if got.err == nil || !strings.Contains(got.err.Error(), tc.errHas) {
					t.Fatalf("error %v; want one saying %q", got.err, tc.errHas)
				}
				return
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			for k, v := range tc.want {
				if got.values[k] != v {
					t.Errorf("%s = %q; want %q", k, got.values[k], v)
				}
			}
		})
	}
}

type probed struct {
	values map[string]string
	err    error
}

// probeFlags parses args for form (the run form or a subcommand) as run
// does, with the flags made by form bound to fresh options, and returns
// every flag's value after applyEnv.
func probeFlags(t *testing.T, form string, formFlags func(*options) []cli.Flag, args []string, vars map[string]string) probed {
	t.Helper()
	o := &options{}
	flags := takeEnv(formFlags(o))
	scopes := []scope{newScope("", flags)}
	if form != "" {
		scopes = append(scopes, newScope(form, flags))
	}
	in := args
	if form != "" {
		in = append([]string{form, "x"}, args...)
	}
	p := preparse(in, false, nil, scopes)
	if p.err != nil {
		return probed{err: p.err}
	}
	var res probed
	action := func(c *cli.Context) error {
		if err := applyEnv(c, o, flags, func(k string) (string, bool) { v, ok := vars[k]; return v, ok }); err != nil {
			return err
		}
		res.values = map[string]string{}
		for _, f := range flags {
			n := f.Names()[0]
			if _, ok := f.(*cli.StringSliceFlag); ok {
				res.values[n] = strings.Join(c.StringSlice(n), ",")
				continue
			}
			switch kindOf(f) {
			case kindBool:
				res.values[n] = fmt.Sprint(c.Bool(n))
			case kindDuration:
				res.values[n] = c.Duration(n).String()
			case kindInt:
				res.values[n] = fmt.Sprint(c.Int(n))
			default:
				res.values[n] = c.String(n)
			}
		}
		return nil
	}
	app := &cli.App{Name: "probe", Flags: flags, Action: action, HideHelp: true, HideVersion: true,
		ExitErrHandler: func(*cli.Context, error) {}, Writer: os.Stderr, ErrWriter: os.Stderr}
	if form != "" {
		app.Flags = nil
		app.Commands = []*cli.Command{{Name: form, Flags: flags, Action: action, HideHelp: true}}
	}
	res.err = app.Run(append([]string{"probe"}, p.args...))
	return res
}

// End to end: the flag wins, and the precedence shows in
// what leaderrun does.
func TestPrecedenceEndToEnd(t *testing.T) {
	held := holdLease(t, "busy", "other")
	free := "file://" + t.TempDir()
	t.Run("--wait beats LEADERRUN_NO_WAIT", func(t *testing.T) {
		code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_NO_WAIT": "yes", "LEADERRUN_STORE": held}, "--wait", "50ms", "--name", "busy", "--", "true")
		if code != run.ExitConflict || !strings.Contains(errOut, "waiting") {
			t.Fatalf("exit %d, stderr %q; want 75 after waiting", code, errOut)
		}
	})
	t.Run("-n beats LEADERRUN_WAIT", func(t *testing.T) {
		code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_WAIT": "forever", "LEADERRUN_STORE": held}, "-n", "--name", "busy", "--", "true")
		if code != run.ExitConflict || strings.Contains(errOut, "waiting") {
			t.Fatalf("exit %d, stderr %q; want 75 without waiting", code, errOut)
		}
	})
	t.Run("run variables do not reach status", func(t *testing.T) {
		code, out, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": held, "LEADERRUN_TTL": "5", "LEADERRUN_NO_WAIT": "maybe"}, "status", "busy")
		if code != 0 || !strings.Contains(out, "held by other") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want status to ignore the run form's variables", code, out, errOut)
		}
	})
	t.Run("-n --wait 2s refused", func(t *testing.T) {
		code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": held}, "-n", "--wait", "2s", "--name", "busy", "--", "true")
		if code != run.ExitFailure || !strings.Contains(oneLineOf(t, errOut), "contradict") {
			t.Fatalf("exit %d, stderr %q; want 125 saying they contradict", code, errOut)
		}
	})
	t.Run("flags beat variables for timing, name, holder, code", func(t *testing.T) {
		vars := map[string]string{"LEADERRUN_STORE": held, "LEADERRUN_TTL": "9s", "LEADERRUN_GRACE": "1s", "LEADERRUN_NAME": "busy",
			"LEADERRUN_HOLDER": "env-holder", "LEADERRUN_CONFLICT_EXIT_CODE": "9", "LEADERRUN_QUIET": "yes"}
		code, _, errOut := runEnv(t, vars, "-v", "--store", free, "--ttl", "6s", "--grace", "500ms", "--name", "mine", "--holder", "flag-holder", "--", "true")
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		for _, want := range []string{"ttl=6s", "grace=500ms", "lease mine acquired", "holder=flag-holder"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr %q does not say %q", errOut, want)
			}
		}
		code, _, errOut = runEnv(t, vars, "--conflict-exit-code", "3", "-n", "--", "true")
		if code != 3 {
			t.Fatalf("exit %d, stderr %q; want the flag's conflict code 3", code, errOut)
		}
	})
}

// Booleans as systemd users write them, durations
// without a unit, unknown flags, explicitly empty values.
func TestValueMessages(t *testing.T) {
	store := "file://" + t.TempDir()
	for _, v := range []string{"yes", "YES", "on", "On", "true", "1", "y"} {
		t.Run("LEADERRUN_QUIET="+v, func(t *testing.T) {
			code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": store, "LEADERRUN_QUIET": v}, "--", "true")
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q; want a quiet clean run", code, errOut)
			}
		})
	}
	for _, v := range []string{"no", "NO", "off", "false", "0"} {
		t.Run("LEADERRUN_QUIET="+v, func(t *testing.T) {
			code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": store, "LEADERRUN_QUIET": v}, "--", "true")
			if code != 0 || !strings.Contains(errOut, "acquired") {
				t.Fatalf("exit %d, stderr %q; want the normal lines", code, errOut)
			}
		})
	}
	tests := []struct {
		name string
		vars map[string]string
		args []string
		says string
	}{
		{"bool variable", map[string]string{"LEADERRUN_NO_WAIT": "maybe"}, []string{"--", "true"}, `LEADERRUN_NO_WAIT=maybe (--no-wait): want true or false (also yes/no, on/off, 1/0)`},
		{"bool flag", nil, []string{"--quiet=maybe", "--", "true"}, `--quiet maybe: want true or false`},
		{"bare ttl", nil, []string{"--ttl", "5", "--", "true"}, "--ttl 5: did you mean 5s?"},
		{"bare ttl=", nil, []string{"--ttl=5", "--", "true"}, "--ttl 5: did you mean 5s?"},
		{"bare ttl variable", map[string]string{"LEADERRUN_TTL": "5"}, []string{"--", "true"}, "LEADERRUN_TTL=5 (--ttl): did you mean 5s?"},
		{"bare grace", nil, []string{"--grace", "1.5", "--", "true"}, "--grace 1.5: did you mean 1.5s?"},
		{"bare wait", nil, []string{"--wait", "10", "--", "true"}, "--wait 10: did you mean 10s?"},
		{"bare wait variable", map[string]string{"LEADERRUN_WAIT": "30"}, []string{"--", "true"}, "LEADERRUN_WAIT=30 (--wait): did you mean 30s?"},
		{"bare interval", nil, []string{"watch", "x", "--interval", "2"}, "--interval 2: did you mean 2s?"},
		{"bare interval variable", map[string]string{"LEADERRUN_WATCH_INTERVAL": "2"}, []string{"watch", "x"}, "LEADERRUN_WATCH_INTERVAL=2 (--interval): did you mean 2s?"},
		// A window into the past: a bare number is likelier hours.
		{"bare ran-within", nil, []string{"check", "x", "--ran-within", "25"}, "--ran-within 25: did you mean 25h?"},
		{"bare since", nil, []string{"history", "x", "--since", "2"}, "--since 2: did you mean 2h?"},
		// Zone names are case-sensitive; the one meant is named.
		// A Pod label marks one leader; with slots each holder would
		// take it off the others.
		{"pod-label with slots", nil, []string{"--slots", "2", "--pod-label", "role=leader", "--", "true"}, "--pod-label with --slots 2: a label marks the one leader's Pod"},
		{"zone case", nil, []string{"--once-per", "day", "--once-per-zone", "europe/berlin", "--", "true"}, `--once-per-zone "europe/berlin": no such zone; did you mean Europe/Berlin?`},
		// Go's durations have no days.
		{"days ran-within", nil, []string{"check", "x", "--ran-within", "1d"}, "--ran-within 1d: durations have no days; did you mean 24h?"},
		{"days ttl variable", map[string]string{"LEADERRUN_TTL": "2d"}, []string{"--", "true"}, "LEADERRUN_TTL=2d (--ttl): durations have no days; did you mean 48h?"},
		{"not a duration", nil, []string{"--ttl", "soon", "--", "true"}, "--ttl soon: want a duration such as 500ms, 15s or 10m"},
		{"unknown flag", nil, []string{"--tll", "5s", "--", "true"}, "unknown flag --tll; did you mean --ttl?"},
		{"unknown flag 2", nil, []string{"--renew-evry", "5s", "--", "true"}, "did you mean --renew-every?"},
		{"unknown flag far off", nil, []string{"--frobnicate", "--", "true"}, "unknown flag --frobnicate"},
		{"unknown flag with a secret", nil, []string{"--stor=redis://:hunter2@127.0.0.1", "--", "true"}, "unknown flag --stor; did you mean --store?"},
		{"empty name", nil, []string{"--name", "", "--", "true"}, `--name "": empty value`},
		{"empty name=", nil, []string{"--name=", "--", "true"}, `--name "": empty value`},
		{"empty store", nil, []string{"--store", "", "--", "true"}, `--store "": empty value`},
		{"int", nil, []string{"--conflict-exit-code", "x", "--", "true"}, "--conflict-exit-code x: want a whole number"},
		{"priority not a number", nil, []string{"--priority", "high", "--", "true"}, "--priority high: want a whole number"},
		{"priority out of range", nil, []string{"--priority", "2000000", "--", "true"}, "--priority 2000000: want a whole number from -1000000 to 1000000"},
		{"priority variable out of range", map[string]string{"LEADERRUN_PRIORITY": "-2000000"}, []string{"--", "true"}, "LEADERRUN_PRIORITY=-2000000 (--priority): want a whole number from -1000000 to 1000000"},
		{"once is watch's", nil, []string{"--once", "--", "true"}, "--once"},
		{"negative grace", nil, []string{"--grace", "-1s", "--", "true"}, "--grace -1s: durations must not be negative"},
		{"negative renew", nil, []string{"--renew-every", "-1s", "--", "true"}, "--renew-every -1s: durations must not be negative"},
		{"hold for a century", nil, []string{"--hold-at-least", "999999h", "--", "true"}, "--hold-at-least 999999h: want a duration from 0 to 744h (31 days"},
		{"negative hold", nil, []string{"--hold-at-least", "-1s", "--", "true"}, "--hold-at-least -1s: want a duration from 0 to 744h"},
		{"priority step too long", nil, []string{"--priority-step", "2m", "--", "true"}, "--priority-step 2m: want a duration from 1ms to 1m"},
		{"priority step zero", map[string]string{"LEADERRUN_PRIORITY_STEP": "0s"}, []string{"--", "true"}, "LEADERRUN_PRIORITY_STEP=0s (--priority-step): want a duration from 1ms to 1m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"LEADERRUN_STORE": store}
			for k, v := range tc.vars {
				vars[k] = v
			}
			code, out, errOut := runEnv(t, vars, tc.args...)
			line := oneLineOf(t, errOut)
			if code != run.ExitFailure || !strings.Contains(line, tc.says) || out != "" {
				t.Fatalf("exit %d, stderr %q; want 125 saying %q", code, errOut, tc.says)
			}
			if strings.Contains(line, "hunter2") {
				t.Fatalf("stderr %q shows the password", line)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"ttl", "ttl", 0}, {"tll", "ttl", 1}, {"tl", "ttl", 1}, {"stroe", "store", 1}, {"", "abc", 3}, {"grace", "trace", 1}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d; want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

// Help is a command, `-- help` is a program.
func TestHelpCommand(t *testing.T) {
	tests := []struct {
		args []string
		has  []string
	}{
		{[]string{"help"}, []string{"leaderrun [flags] -- COMMAND", "GLOBAL OPTIONS"}},
		{[]string{"-h"}, []string{"leaderrun [flags] -- COMMAND"}},
		{[]string{"help", "status"}, []string{"leaderrun status [flags] NAME", "DESCRIPTION", "3 free", "--json"}},
		{[]string{"status", "--help"}, []string{"leaderrun status [flags] NAME", "DESCRIPTION"}},
		{[]string{"help", "watch"}, []string{"leaderrun watch [flags] NAME", "DESCRIPTION", "--interval DURATION"}},
		{[]string{"watch", "x", "-h"}, []string{"leaderrun watch [flags] NAME"}},
		{[]string{"status", "x", "--help=yes"}, []string{"leaderrun status [flags] NAME"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runEnv(t, nil, tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, h := range tc.has {
				if !strings.Contains(out, h) {
					t.Errorf("help does not say %q:\n%s", h, out)
				}
			}
			checkHelpText(t, out)
		})
	}
	// After "--", help and h are programs to run.
	for _, args := range [][]string{{"--", "help"}, {"h"}} {
		code, out, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": "file://" + t.TempDir()}, args...)
		if code != run.ExitNotFound || out != "" || !strings.Contains(errOut, "not found") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 127: %s looked up as a program", args, code, out, errOut, args[len(args)-1])
		}
	}
	code, _, errOut := runEnv(t, nil, "help", "bogus")
	if code != run.ExitFailure || !strings.Contains(oneLineOf(t, errOut), `no help for "bogus"`) {
		t.Fatalf("help bogus: exit %d, stderr %q", code, errOut)
	}
}

// checkHelpText: placeholders name what a value is, and no default is
// given twice or for booleans.
func checkHelpText(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Count(line, "(default:") > 1 {
			t.Errorf("doubled default: %q", line)
		}
		if strings.Contains(line, "(default: false)") || strings.Contains(line, "(default: 0s)") {
			t.Errorf("meaningless default: %q", line)
		}
		if strings.HasPrefix(strings.TrimSpace(line), "--") && strings.Contains(line, " value ") {
			t.Errorf("placeholder says value: %q", line)
		}
	}
	for _, want := range []string{"--ttl DURATION", "--renew-every DURATION", "--grace DURATION", "--call-timeout DURATION", "--stop-signal SIGNAL", "--wait DURATION"} {
		if strings.Contains(out, "GLOBAL OPTIONS") && !strings.Contains(out, want) {
			t.Errorf("help does not show %q", want)
		}
	}
}

func TestFormatTime(t *testing.T) {
	zone := time.FixedZone("XST", 3*3600)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, zone)
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{"today", time.Date(2026, 11, 22, 9, 15, 7, 0, zone), "09:15:07"},
		{"today from UTC", time.Date(2026, 11, 21, 22, 0, 1, 0, time.UTC), "01:00:01"}, // 01:00:01 XST on the 22nd
		{"yesterday", time.Date(2026, 11, 21, 23, 59, 59, 0, zone), "2026-11-21 23:59:59"},
		{"a year ago same day", time.Date(2025, 11, 22, 9, 0, 0, 0, zone), "2025-11-22 09:00:00"},
		{"tomorrow", time.Date(2026, 11, 23, 0, 0, 0, 0, zone), "2026-11-23 00:00:00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FormatTime(tc.t, now); got != tc.want {
				t.Errorf("FormatTime = %q; want %q", got, tc.want)
			}
			if got := FormatTimeZone(tc.t, now); got != tc.want+" XST" {
				t.Errorf("FormatTimeZone = %q; want %q", got, tc.want+" XST")
			}
		})
	}
}

// status shows when the holder took the lease, with a zone.
func TestStatusShowsZone(t *testing.T) {
	store := holdLease(t, "zoned", "h1")
	code, out, errOut := runEnv(t, nil, "status", "--store", store, "zoned")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	zone := time.Now().Format("MST")
	if !strings.Contains(out, " since ") || !strings.Contains(out, " "+zone+" (") {
		t.Fatalf("status %q does not show the time with its zone %s", out, zone)
	}
}

// Floors, refused before anything starts.
func TestFloors(t *testing.T) {
	store := "file://" + t.TempDir()
	marker := filepath.Join(t.TempDir(), "started")
	tests := []struct {
		name string
		args []string
		says string
	}{
		{"renew-every 1us", []string{"--renew-every", "1us"}, "--renew-every ≥ 10ms"},
		{"call-timeout 1ms", []string{"--renew-every", "100ms", "--call-timeout", "1ms"}, "--call-timeout ≥ 5ms"},
		{"watch interval 1ns", []string{"watch", "x", "--interval", "1ns"}, "--interval 1ns: want at least 10ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--store", store}, tc.args...)
			if args[2] != "watch" {
				args = append(args, "--", "touch", marker)
			}
			code, out, errOut := runEnv(t, nil, args...)
			if code != run.ExitFailure || !strings.Contains(oneLineOf(t, errOut), tc.says) || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 125 saying %q", code, out, errOut, tc.says)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child was started")
			}
		})
	}
	// At the floors, a run works.
	code, _, errOut := runEnv(t, nil, "--store", store, "--ttl", "2s", "--renew-every", "10ms", "--call-timeout", "5ms", "--", "true")
	if code != 0 {
		t.Fatalf("at the floors: exit %d, stderr %q", code, errOut)
	}
}

// The scopes preparse uses know every flag urfave will see.
func TestScopesCoverHelpAndVersion(t *testing.T) {
	s := newScope("", slices.Concat(runFlags(&options{}), []cli.Flag{cli.HelpFlag, cli.VersionFlag}))
	for _, n := range []string{"h", "help", "version", "n", "q", "v", "ttl"} {
		if _, ok := s.flags[n]; !ok {
			t.Errorf("run scope lacks %s", n)
		}
	}
}

// Main reads the environment it is given, never the process's own copy.
func TestMainReadsGivenEnvironment(t *testing.T) {
	t.Setenv("LEADERRUN_TTL", "5")
	environ := []string{"LEADERRUN_STORE=file://" + t.TempDir(), "LEADERRUN_TTL=7", "LEADERRUN_LOG_FORMAT=json"}
	dir := t.TempDir()
	errf, err := os.Create(filepath.Join(dir, "err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	code := Main(context.Background(), []string{"leaderrun", "--", "true"}, environ, Stdio{In: os.Stdin, Out: errf, Err: errf})
	b, _ := os.ReadFile(errf.Name())
	var obj struct {
		Msg      string `json:"msg"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(oneLineOf(t, string(b))), &obj); err != nil {
		t.Fatalf("stderr %q: %v", b, err)
	}
	if code != run.ExitFailure || obj.ExitCode != run.ExitFailure || !strings.Contains(obj.Msg, "LEADERRUN_TTL=7 (--ttl): did you mean 7s?") {
		t.Fatalf("exit %d, stderr %q; want 125 suggesting 7s (the given LEADERRUN_TTL, not the process's)", code, b)
	}
}

// A repeatable flag (StringSliceFlag) reads its variable through getenv
// too, comma-separated, and the command line replaces it.
func TestListFlagVariable(t *testing.T) {
	flags := runFlags
	vars := map[string]string{"LEADERRUN_PASS_ENV": "A,B"}
	if got := probeFlags(t, "", flags, nil, vars); got.err != nil || got.values["pass-env"] != "A,B" {
		t.Fatalf("variable alone: %q, %v; want A,B", got.values["pass-env"], got.err)
	}
	got := probeFlags(t, "", flags, []string{"--pass-env", "C", "--pass-env=D"}, vars)
	if got.err != nil || got.values["pass-env"] != "C,D" {
		t.Fatalf("flags and variable: %q, %v; want C,D", got.values["pass-env"], got.err)
	}
}

// A LEADERRUN_* variable evidently meant to name the store (a near miss of
// LEADERRUN_STORE, or any unknown variable holding a URL) while no store is
// given is refused: ignoring it would run the job on this host's file store,
// which excludes no other host. One line, 125, the value never shown, the
// child never started, also with -q and for status.
func TestStrayStoreVarRefused(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, tc := range []struct{ k, v string }{
		{"LEADERRUN_STOR", "redis://:" + secret + "@redis.internal:6379"},
		{"LEADERRUN_STORE_URL", "redis://redis.internal:6379"},
		{"LEADERRUN_URL", "rediss://u:" + secret + "@redis.internal:6380"},
		{"LEADERRUN_REDIS", "redis://redis.internal:6379"},
		{"LEADERRUN_DB", "postgres://app:" + secret + "@db/leases"},
		{"LEADERRUN_ETCD", "etcd://10.0.0.1:2379"},
		{"LEADERRUN_LOCK", "unix:/run/redis.sock"},                 // a known scheme without //
		{"LEADERRUN_STROE", "/var/lock/leaderrun"},                 // a near miss, whatever its value
		{"LEADERRUN_STORE_DIR", "/var/lock/leaderrun"},             // a STORE name, whatever its value
		{"LEADERRUN_BACKEND", "consul://10.0.0.1:8500"},            // any scheme://
		{"LEADERRUN_STOR", "redis://redis.internal:6379 trailing"}, // not even a valid URL
	} {
		for _, form := range [][]string{
			{"-q", "--name", "stray", "--", "sh", "-c", "touch \"$0\"", "MARKER"},
			{"--name", "stray", "--", "sh", "-c", "touch \"$0\"", "MARKER"},
			{"status", "stray"},
			{"history", "-q", "stray"},
		} {
			t.Run(tc.k+"/"+form[0], func(t *testing.T) {
				marker := filepath.Join(t.TempDir(), "ran")
				args := slices.Clone(form)
				if i := slices.Index(args, "MARKER"); i >= 0 {
					args[i] = marker
				}
				code, out, errOut := runEnv(t, map[string]string{tc.k: tc.v}, args...)
				line := oneLineOf(t, errOut)
				if code != run.ExitFailure || out != "" || !strings.Contains(line, tc.k) || !strings.Contains(line, "LEADERRUN_STORE") || !strings.Contains(line, "nothing was run") {
					t.Fatalf("exit %d, stdout %q, stderr %q; want 125 and one line naming %s and LEADERRUN_STORE", code, out, errOut, tc.k)
				}
				if strings.Contains(errOut, secret) || strings.Contains(errOut, "redis.internal") || strings.Contains(errOut, "10.0.0.1") {
					t.Fatalf("stderr %q shows the variable's value", errOut)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the child ran")
				}
			})
		}
	}
}

// What a stray store variable must not catch: the variables leaderrun gives
// its child (a nested leaderrun sees them), a script's own LEADERRUN_*
// variables that hold no URL, the test suite's own, and any of them when a
// store is given (the lease is then where the user said: a near miss only
// warns).
func TestStrayStoreVarHarmless(t *testing.T) {
	store := "file://" + t.TempDir()
	nested := []string{envLease + "=outer", envLeaseHolder + "=host:1", envLeaseToken + "=7", envTokenDeprecated + "=7"} // what the run gives its child
	harmless := map[string]string{
		"LEADERRUN_JOB_DIR":       "/srv/job",
		"LEADERRUN_JOB_DIRECTORY": "/srv/job",
		"LEADERRUN_TEST_ETCD_URL": "etcd://127.0.0.1:1",
		"LEADERRUN_RETRIES":       "3",
		// Not a CI job, whatever the suite's is: the default store in
		// one is warned of (TestFileStoreInCIWarned).
		"CI": "", "JENKINS_URL": "", "TF_BUILD": "",
	}
	for _, kv := range nested {
		k, v, _ := strings.Cut(kv, "=")
		harmless[k] = v
	}
	run := func(t *testing.T, vars map[string]string, args ...string) string {
		t.Helper()
		marker := filepath.Join(t.TempDir(), "ran")
		code, _, errOut := runEnv(t, vars, append(args, "--name", "harmless-"+filepath.Base(filepath.Dir(marker)), "--", "sh", "-c", `touch "$0"`, marker)...)
		if _, err := os.Stat(marker); code != 0 || err != nil {
			t.Fatalf("exit %d (child ran: %v), stderr %q; want the child run", code, err == nil, errOut)
		}
		return errOut
	}
	t.Run("default store", func(t *testing.T) {
		if errOut := run(t, harmless, "-q"); errOut != "" {
			t.Fatalf("stderr %q; want nothing", errOut)
		}
	})
	t.Run("LEADERRUN_STORE given", func(t *testing.T) {
		errOut := run(t, map[string]string{"LEADERRUN_STORE": store, "LEADERRUN_STOR": "redis://x:6379", "LEADERRUN_REDIS": "redis://x:6379"}, "-q")
		if !strings.Contains(errOut, "LEADERRUN_STOR is not a leaderrun variable and is ignored; did you mean LEADERRUN_STORE?") || strings.Contains(errOut, "LEADERRUN_REDIS") {
			t.Fatalf("stderr %q; want the near miss warned of, the URL variable left alone", errOut)
		}
	})
	t.Run("--store given", func(t *testing.T) {
		errOut := run(t, map[string]string{"LEADERRUN_STORE_URL": "redis://x:6379"}, "-q", "--store", store)
		if errOut != "" {
			t.Fatalf("stderr %q; want nothing (a unit's own variable, passed as --store ${LEADERRUN_STORE_URL})", errOut)
		}
	})
}

// The first word of a command written without "--" that looks like a
// mistyped or shortened leaderrun command is refused with the command it
// was likely meant to be (one line, 125, nothing run); a program that is a
// prefix of a command (stat) is ambiguous and refused with both readings;
// after "--" the word always runs, and a program merely one letter from a
// command (patch) runs as before.
func TestNearCommand(t *testing.T) {
	bin := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	for _, prog := range []string{"stat", "patch"} {
		script := "#!/bin/sh\ntouch " + marker + "\n"
		if err := os.WriteFile(filepath.Join(bin, prog), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	store := "file://" + t.TempDir()
	for _, tc := range []struct {
		args []string
		says string // "" when the program runs
	}{
		{[]string{"stauts", "demo"}, "unknown command stauts; did you mean status?"},
		{[]string{"Status", "demo"}, "unknown command Status; did you mean status?"},
		{[]string{"-q", "wacth", "demo"}, "unknown command wacth; did you mean watch?"},
		{[]string{"chek", "--ran-within", "1h", "demo"}, "unknown command chek; did you mean check?"},
		{[]string{"histroy", "demo"}, "unknown command histroy; did you mean history?"},
		{[]string{"hist", "demo"}, "unknown command hist; did you mean history?"},
		{[]string{"hlep"}, "unknown command hlep; did you mean help?"},
		{[]string{"stat", "demo"}, "stat is short for the command status and is also a program: write leaderrun status … for the command, or leaderrun [flags] -- stat … to run the program under a lease"},
		{[]string{"--name", "s", "--", "stat", "demo"}, ""},
		{[]string{"--name", "p", "patch", "-p1"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			os.Remove(marker)
			code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": store, "PATH": os.Getenv("PATH")}, tc.args...)
			_, err := os.Stat(marker)
			ran := err == nil
			if tc.says == "" {
				if code != 0 || !ran {
					t.Fatalf("exit %d, ran %v, stderr %q; want the program run", code, ran, errOut)
				}
				return
			}
			line := oneLineOf(t, errOut)
			if code != run.ExitFailure || ran || !strings.Contains(line, tc.says) {
				t.Fatalf("exit %d, ran %v, stderr %q; want 125, nothing run, saying %q", code, ran, errOut, tc.says)
			}
			// The suggestion followed is accepted (status of a free lease
			// exits 3, check of a lease never run 2, help 0); watch would
			// run until interrupted.
			_, meant, _ := strings.Cut(tc.says, "did you mean ")
			if meant = strings.TrimSuffix(meant, "?"); meant == "" {
				meant = "status"
			}
			followed := slices.Clone(tc.args)
			followed[slices.IndexFunc(followed, func(a string) bool { return !strings.HasPrefix(a, "-") })] = meant
			if meant == "watch" {
				return // runs until interrupted
			}
			if code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": store}, followed...); code == run.ExitFailure {
				t.Fatalf("the suggestion followed, %q: exit %d, stderr %q", followed, code, errOut)
			}
		})
	}
}

// Short boolean flags combine as getopt's do: -nq is -n -q.
func TestCombinedShortFlags(t *testing.T) {
	held := holdLease(t, "busy", "h1")
	for _, args := range [][]string{{"-nq"}, {"-qn"}, {"-n", "-q"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": held}, append(args, "--name", "busy", "--", "true")...)
			if code != run.ExitConflict || errOut != "" {
				t.Fatalf("exit %d, stderr %q; want %d (no wait) and nothing printed (quiet)", code, errOut, run.ExitConflict)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-qv", "--", "true"}, "--quiet and --verbose contradict each other"},
		{[]string{"-nx", "--", "true"}, "unknown flag -nx"},
		{[]string{"status", "-nq", "busy"}, "status does not take -n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": held}, tc.args...)
			if line := oneLineOf(t, errOut); code != run.ExitFailure || !strings.Contains(line, tc.says) {
				t.Fatalf("exit %d, stderr %q; want 125 saying %q", code, errOut, tc.says)
			}
		})
	}
}

// The --health-* defaults adapt to the values given, as --grace does to a
// short --ttl: only values given (flag or variable) are refused.
func TestHealthDefaultsAdapt(t *testing.T) {
	parse := func(t *testing.T, vars map[string]string, args ...string) (run.HealthConfig, error) {
		t.Helper()
		o := &options{}
		flags := runFlags(o)
		set := flag.NewFlagSet("leaderrun", flag.ContinueOnError)
		for _, f := range takeEnv(flags) {
			if err := f.Apply(set); err != nil {
				t.Fatal(err)
			}
		}
		if err := set.Parse(args); err != nil {
			t.Fatal(err)
		}
		c := cli.NewContext(&cli.App{}, set, nil)
		if err := applyEnv(c, o, flags, func(k string) (string, bool) { v, ok := vars[k]; return v, ok }); err != nil {
			t.Fatal(err)
		}
		return health(o, o.run.Timing.TTL)
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		vars              map[string]string
		args              []string
		interval, timeout time.Duration
	}{
		{nil, []string{"--health-cmd=true"}, 10 * time.Second, 5 * time.Second},
		{nil, []string{"--health-cmd=true", "--health-interval=200ms"}, 200 * ms, 200 * ms},
		{map[string]string{"LEADERRUN_HEALTH_INTERVAL": "200ms"}, []string{"--health-cmd=true"}, 200 * ms, 200 * ms},
		{nil, []string{"--health-cmd=true", "--ttl=3s"}, 10 * time.Second, 1500 * ms},
		{nil, []string{"--health-cmd=true", "--ttl=1s", "--health-interval=300ms"}, 300 * ms, 300 * ms},
		{nil, []string{"--health-cmd=true", "--health-timeout=12s", "--ttl=1m"}, 12 * time.Second, 12 * time.Second},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h, err := parse(t, tc.vars, tc.args...)
			if err != nil || h.Interval != tc.interval || h.Timeout != tc.timeout {
				t.Fatalf("interval %v, timeout %v, %v; want %v and %v, accepted", h.Interval, h.Timeout, err, tc.interval, tc.timeout)
			}
		})
	}
	for _, tc := range []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, []string{"--health-cmd=true", "--health-interval=200ms", "--health-timeout=5s"}, "--health-timeout 5s is longer than --health-interval 200ms"},
		{map[string]string{"LEADERRUN_HEALTH_TIMEOUT": "5s"}, []string{"--health-cmd=true", "--health-interval=200ms"}, "LEADERRUN_HEALTH_TIMEOUT=5s (--health-timeout) is longer than --health-interval 200ms"},
		{nil, []string{"--health-cmd=true", "--ttl=3s", "--health-timeout=3s"}, "--health-timeout 3s is not shorter than --ttl 3s"},
		{nil, []string{"--health-cmd=true", "--health-interval=2m", "--health-timeout=90s", "--ttl=1m"}, "--health-timeout 1m30s is not shorter than --ttl 1m"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if _, err := parse(t, tc.vars, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want %q", err, tc.want)
			}
		})
	}
	// The whole command line: the case runs.
	code, _, errOut := runEnv(t, map[string]string{"LEADERRUN_STORE": "file://" + t.TempDir()}, "--health-cmd", "true", "--health-interval", "200ms", "--name", "adapt", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q; want 0", code, errOut)
	}
}

// --version says version, commit and Go version.
func TestVersion(t *testing.T) {
	code, out, errOut := runEnv(t, nil, "--version")
	if code != 0 || errOut != "" || !strings.Contains(out, runtime.Version()) || !strings.HasPrefix(out, "leaderrun ") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q; want the Go version", code, out, errOut)
	}
}
