package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// histRun is a run as history --json prints it.
type histRun struct {
	Name     string    `json:"name"`
	Holder   string    `json:"holder"`
	Token    uint64    `json:"token"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Outcome  string    `json:"outcome"`
	ExitCode int       `json:"exit_code"`
	Signal   string    `json:"signal"`
	Version  string    `json:"version"`
	Running  bool      `json:"running"`
	// Granted is when the store granted the run's lease, on its clock
	// (stores whose tokens count their clock); zero when not recorded.
	Granted time.Time `json:"granted"`
	// Slot and Slots: a run in a slot (--slots), whose Holder is then
	// the label alone.
	Slot  *int `json:"slot"`
	Slots int  `json:"slots"`
}

// leaderOut runs a leaderrun subcommand to completion and returns its exit
// code, stdout and stderr.
func leaderOut(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(lrBin, args...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1", "TZ=UTC"), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("leaderrun %v: %v", args, err)
	}
	return code, string(out), stderr.String()
}

// history reads name's runs with history --json.
func history(t *testing.T, env []string, name string, extra ...string) []histRun {
	t.Helper()
	code, out, stderr := leaderOut(t, env, append([]string{"history", "--json", name}, extra...)...)
	if code != 0 {
		t.Fatalf("history %s: exit %d, stderr %s", name, code, stderr)
	}
	var runs []histRun
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("history --json: %v: %q", err, out)
	}
	return runs
}

// holdWithToken starts a leader whose child prints its PID and token, then
// sleeps; it returns the leader and the token.
func holdWithToken(t *testing.T, env []string, name string, extra ...string) (*lr, uint64) {
	t.Helper()
	args := append(append([]string{"--name", name}, extra...), "--", "sh", "-c", `echo "ready $$ $LEADERRUN_LEASE_TOKEN"; exec sleep 300`)
	p := start(t, env, args...)
	f := strings.Fields(p.line())
	if len(f) != 3 || f[0] != "ready" {
		t.Fatalf("leader's child said %q", f)
	}
	tok, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return p, tok
}

// waitRunning waits until the history shows token as running: the start
// record is written while the child starts, not before.
func waitRunning(t *testing.T, env []string, name string, token uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs := history(t, env, name, "--limit", "1")
		if len(runs) == 1 && runs[0].Token == token && runs[0].Running && runs[0].End.IsZero() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the start of token %d never showed as running: %+v", token, runs)
		}
		time.Sleep(20 * time.Millisecond) // polling another process's write: no event to await
	}
}

// testRunHistory runs one of each outcome on the store env selects and
// checks history, status and check in text and JSON. breakLease, when not
// nil, takes the lease away behind the holder's back (the run is lost);
// killTTL is the --ttl of the leader that is SIGKILLed (the shortest the
// store takes: the test waits for it to expire).
func testRunHistory(t *testing.T, env []string, name, killTTL string, breakLease func(name string)) {
	if code, out, _ := leaderOut(t, env, "history", name); code != 0 || out != name+": no runs recorded\n" {
		t.Fatalf("history of a new name: exit %d, %q", code, out)
	}
	if code, out, _ := leaderOut(t, env, "check", "--ran-within", "1h", name); code != 2 || !strings.HasPrefix(out, "MISSED: "+name+": no run within 1h; no run recorded") {
		t.Fatalf("check of a new name: exit %d, %q; want 2 and MISSED", code, out)
	}
	type want struct {
		outcome string
		code    int
		signal  string
	}
	var wants []want
	run := func(w want, args ...string) {
		t.Helper()
		code, stderr := runLR(t, env, append([]string{"--name", name, "--holder", "host-" + w.outcome}, args...)...)
		if code != w.code {
			t.Fatalf("%v: exit %d; want %d (%s)", args, code, w.code, stderr)
		}
		wants = append(wants, w)
	}
	run(want{"ok", 0, ""}, "--", "true")
	run(want{"failed", 3, ""}, "--", "sh", "-c", "exit 3")
	run(want{"failed", 137, "SIGKILL"}, "--", "sh", "-c", "kill -KILL $$")

	// Stopped: leaderrun gets TERM and passes it on.
	p, tok := holdWithToken(t, env, name, "--holder", "host-stopped")
	waitRunning(t, env, name, tok)
	if code, out, _ := leaderOut(t, env, "status", name); code != 0 || !strings.Contains(out, "held by host-stopped") ||
		!strings.Contains(out, "\n  last run: host-failed, ") || !strings.HasSuffix(out, ", failed (exit 137, SIGKILL)\n") {
		t.Fatalf("status while running: exit %d, %q; want the holder, then the last run before it", code, out)
	}
	// Another instance finding the lease taken is not a run.
	if code, _ := runLR(t, env, "--name", name, "--wait", "0", "--", "true"); code != 75 {
		t.Fatalf("--wait 0 against the holder: exit %d; want 75", code)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(); code != 143 {
		t.Fatalf("leader after TERM: exit %d; want 143", code)
	}
	wants = append(wants, want{"stopped", 143, "SIGTERM"})

	if breakLease != nil {
		p, tok := holdWithToken(t, env, name, "--holder", "host-lost")
		waitRunning(t, env, name, tok)
		breakLease(name)
		if code := p.wait(); code != 124 {
			t.Fatalf("leader whose lease was broken: exit %d; want 124 (%s)", code, p.stderr.String())
		}
		wants = append(wants, want{"lost", 124, "SIGTERM"}) // leaderrun stopped sleep with TERM
	}

	// SIGKILL of leaderrun: the start stays, without an end.
	// Until the lease expires (at once on the file store) the run shows
	// as running; then as a start without an end.
	p, killed := holdWithToken(t, env, name, "--holder", "host-killed", "--ttl", killTTL)
	waitRunning(t, env, name, killed)
	_ = p.cmd.Process.Kill()
	p.wait()
	wants = append(wants, want{"", 0, ""})
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, _, _ := leaderOut(t, env, "status", name)
		if code == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SIGKILLed leader's lease never became free (status exit %d)", code)
		}
		time.Sleep(50 * time.Millisecond) // the store expires it: no event to await
	}

	runs := history(t, env, name, "--limit", "0")
	if len(runs) != len(wants) {
		t.Fatalf("history: %d runs; want %d: %+v", len(runs), len(wants), runs)
	}
	for i, r := range runs {
		w := wants[len(wants)-1-i] // newest first
		holder := "host-" + w.outcome
		if w.outcome == "" {
			holder = "host-killed"
		}
		if r.Name != name || r.Holder != holder || r.Outcome != w.outcome || r.ExitCode != w.code || r.Signal != w.signal || r.Version == "" || r.Running {
			t.Errorf("run %d = %+v; want %s %+v", i, r, holder, w)
		}
		if w.outcome != "" && (r.End.Before(r.Start) || r.End.IsZero()) || w.outcome == "" && !r.End.IsZero() {
			t.Errorf("run %d: start %v, end %v", i, r.Start, r.End)
		}
		if i > 0 && r.Token >= runs[i-1].Token {
			t.Errorf("run %d: token %d not below the newer %d", i, r.Token, runs[i-1].Token)
		}
	}
	if runs[0].Token != killed {
		t.Fatalf("newest run has token %d; want the killed one's %d", runs[0].Token, killed)
	}
	// A run without an end has no exit code: null, never 0.
	if code, out, _ := leaderOut(t, env, "history", "--json", "--limit", "1", name); code != 0 || !strings.Contains(out, `"exit_code":null`) {
		t.Fatalf("history --json of the killed run: exit %d, %s; want exit_code null", code, out)
	}

	// Text forms.
	code, out, _ := leaderOut(t, env, "history", "--limit", "2", name)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "  host-killed  no end recorded") ||
		!strings.HasSuffix(lines[0], "token "+strconv.FormatUint(killed, 10)) || !strings.Contains(lines[0], " UTC–  ") {
		t.Fatalf("history --limit 2: exit %d, %q", code, out)
	}
	if code, out, _ := leaderOut(t, env, "status", name); code != 3 || out != name+": free\n  last run: host-killed, "+runs[0].Start.UTC().Format(time.TimeOnly)+" UTC–, no end recorded\n" {
		t.Fatalf("status: exit %d, %q", code, out)
	}
	var st struct {
		LastRun histRun `json:"last_run"`
	}
	if code, out, _ := leaderOut(t, env, "status", "--json", name); code != 3 || json.Unmarshal([]byte(out), &st) != nil || st.LastRun.Token != killed {
		t.Fatalf("status --json: exit %d, %q; want last_run with token %d", code, out, killed)
	}
	if got := history(t, env, name, "--since", "1h"); len(got) != len(wants) {
		t.Fatalf("history --since 1h: %d runs; want %d", len(got), len(wants))
	}

	// check: a run within the window; a successful one only the first.
	code, out, _ = leaderOut(t, env, "check", "--ran-within", "1h", name)
	if code != 0 || !strings.HasPrefix(out, "OK: "+name+": a run started ") || !strings.Contains(out, "host-killed") {
		t.Fatalf("check --ran-within 1h: exit %d, %q", code, out)
	}
	code, out, _ = leaderOut(t, env, "check", "--ran-within", "1h", "--succeeded", name)
	if code != 0 || !strings.Contains(out, "a successful run started") || !strings.Contains(out, "host-ok") || !strings.Contains(out, "ok (exit 0)") {
		t.Fatalf("check --succeeded: exit %d, %q", code, out)
	}
	var cj struct {
		OK      bool     `json:"ok"`
		Match   *histRun `json:"match"`
		LastRun *histRun `json:"last_run"`
	}
	code, out, _ = leaderOut(t, env, "check", "--json", "--ran-within", "1h", "--succeeded", name)
	if code != 0 || json.Unmarshal([]byte(out), &cj) != nil || !cj.OK || cj.Match == nil || cj.Match.Holder != "host-ok" || cj.LastRun == nil || cj.LastRun.Token != killed {
		t.Fatalf("check --json --succeeded: exit %d, %q", code, out)
	}
	// A window that ends before the successful run: missed, exit 2.
	okAge := time.Since(runs[len(runs)-1].Start)
	window := (time.Since(runs[len(runs)-2].Start) + okAge) / 2 // after "ok" began, before "failed" did
	code, out, _ = leaderOut(t, env, "check", "--ran-within", window.String(), "--succeeded", name)
	if code != 2 || !strings.HasPrefix(out, "MISSED: "+name+": no successful run within ") || !strings.Contains(out, "last run started") || !strings.Contains(out, "host-killed") {
		t.Fatalf("check --succeeded --ran-within %v: exit %d, %q; want 2", window, code, out)
	}
	code, out, _ = leaderOut(t, env, "check", "--json", "--ran-within", window.String(), "--succeeded", name)
	cj.OK, cj.Match, cj.LastRun = true, nil, nil
	if code != 2 || json.Unmarshal([]byte(out), &cj) != nil || cj.OK || cj.Match != nil || cj.LastRun == nil {
		t.Fatalf("check --json, missed: exit %d, %q", code, out)
	}
	if code, _, stderr := leaderOut(t, env, "check", name); code != 125 || !strings.Contains(stderr, "--ran-within") {
		t.Fatalf("check without --ran-within: exit %d, %q; want 125", code, stderr)
	}

	// The cap, and --history-keep 0.
	if code, stderr := runLR(t, env, "--name", name, "--history-keep", "2", "--", "true"); code != 0 {
		t.Fatalf("--history-keep 2: exit %d (%s)", code, stderr)
	}
	if got := history(t, env, name, "--limit", "0"); len(got) != 2 || got[0].Outcome != "ok" || got[1].Token != killed {
		t.Fatalf("after --history-keep 2: %+v; want the new run and the killed one", got)
	}
	if code, stderr := runLR(t, env, "--name", name, "--history-keep", "0", "--", "true"); code != 0 {
		t.Fatalf("--history-keep 0: exit %d (%s)", code, stderr)
	}
	if got := history(t, env, name, "--limit", "0"); len(got) != 2 || got[1].Token != killed {
		t.Fatalf("after --history-keep 0: %+v; want nothing recorded", got)
	}
}

func TestFileRunHistory(t *testing.T) {
	dir := t.TempDir()
	testRunHistory(t, []string{"LEADERRUN_STORE=file://" + dir}, "hist", "2s", func(name string) {
		// Replace the lock file: the holder's inotify watch sees it.
		path := filepath.Join(dir, name+".lock")
		if err := os.WriteFile(path+".new", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRedisRunHistory(t *testing.T) {
	t.Parallel()
	addr, env := redisE2EShared(t)
	testRunHistory(t, env, e2eName(t, "hist"), "2s", func(name string) {
		redisE2ECLI(t, addr, "DEL", "leaderrun:{"+name+"}")
	})
}

func TestPostgresRunHistory(t *testing.T) {
	t.Parallel()
	raw, env := pgE2EShared(t)
	testRunHistory(t, env, e2eName(t, "hist"), "2s", func(name string) {
		pgE2EExec(t, raw, "DELETE FROM leaderrun_leases WHERE name = $1", name)
	})
}

func TestEtcdRunHistory(t *testing.T) {
	t.Parallel()
	url, env := etcdE2EShared(t)
	testRunHistory(t, env, e2eName(t, "hist"), "2s", func(name string) {
		if out := etcdctl(t, url, "del", "leaderrun/"+name); out != "1" {
			t.Fatalf("etcdctl del said %q; want 1", out)
		}
	})
}

func TestAzureRunHistory(t *testing.T) {
	t.Parallel()
	ep, store := azShared(t, "poll=200ms")
	container := store[strings.LastIndex(store, "/")+1 : strings.Index(store, "?")]
	env := append(azEnv(azDevKey), "LEADERRUN_STORE="+store)
	testRunHistory(t, env, "hist", "15s", func(name string) { azBreak(t, ep, container, name) })
}

// A --hold-at-least slot that other hosts skip (75) and a waiter that
// gives up (75) are not runs: only the holder's run is recorded.
func TestFileHoldSkipsAreNotRuns(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	if code, stderr := runLR(t, env, "--name", "slot", "--hold-at-least", "1h", "--", "true"); code != 0 {
		t.Fatalf("holder: exit %d (%s)", code, stderr)
	}
	for _, wait := range []string{"0", "100ms"} {
		if code, stderr := runLR(t, env, "--name", "slot", "--wait", wait, "--", "true"); code != 75 {
			t.Fatalf("--wait %s during the hold: exit %d; want 75 (%s)", wait, code, stderr)
		}
	}
	if runs := history(t, env, "slot", "--limit", "0"); len(runs) != 1 || runs[0].Outcome != "ok" {
		t.Fatalf("history: %+v; want the holder's run alone", runs)
	}
}

// Users taking turns in a shared store directory (sticky 1777, or group
// 2775) each leave their run in the history; in a 1777 directory, where
// anyone may create files, a reader (root here) counts only the runs of the
// users the directory vouches for: itself, root and the directory's owner.
func TestFileSharedDirectoryHistory(t *testing.T) {
	requireRootE2E(t)
	for _, tc := range []struct {
		name string
		mode os.FileMode
		gid  int
		seen []int // the users whose runs root reads, newest first
	}{
		{"1777", os.ModeSticky | 0o777, 0, []int{2}},
		{"2775", os.ModeSetgid | 0o775, e2eGroup, []int{3, 2, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"LEADERRUN_STORE=" + sharedURL(t, tc.mode, tc.gid)}
			users := []asUser{e2eNobody, e2eNoPw, e2eRoot, e2eNobody}
			for i, u := range users {
				if code, stderr := runAs(t, u, env, "-v", "--holder", "user-"+strconv.Itoa(i), "--name", "nightly", "--", "true"); code != 0 || strings.Contains(stderr, "history") {
					t.Fatalf("as uid %d: exit %d: %s", u.uid, code, stderr)
				}
			}
			runs := history(t, env, "nightly", "--limit", "0")
			if len(runs) != len(tc.seen) {
				t.Fatalf("history: %+v; want %d runs", runs, len(tc.seen))
			}
			for i, r := range runs {
				if want := "user-" + strconv.Itoa(tc.seen[i]); r.Holder != want || r.Outcome != "ok" {
					t.Errorf("run %d = %+v; want %s, ok", i, r, want)
				}
			}
		})
	}
}

// A run whose history cannot be written (NAME~runs-UID is a directory: as a
// role without a grant on the runs table, it fails every run) exits as its
// child did and says so in one line, without -v: check may report MISSED.
func TestHistoryNotWrittenWarns(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "nohist~runs-"+strconv.Itoa(os.Geteuid())), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stderr := runLR(t, []string{"LEADERRUN_STORE=file://" + dir}, "--name", "nohist", "--", "true")
	if n := strings.Count(stderr, "run history of lease nohist not written"); code != 0 || n != 1 ||
		!strings.Contains(stderr, "check may report MISSED for this run") || strings.Contains(stderr, "turns it off") {
		t.Fatalf("exit %d, stderr %q; want 0 and one warning that check may report MISSED", code, stderr)
	}
}
