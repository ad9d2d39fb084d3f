package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A run with a passing package, a failing test (with a subtest) and a
// package that did not build: the counts are top-level tests plus the
// package without a test result, and the failures' output is shown.
func TestSummary(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b)
	for _, e := range []event{
		{Action: "start", Package: "p/a"},
		{Action: "run", Package: "p/a", Test: "TestOne"},
		{Action: "pass", Package: "p/a", Test: "TestOne"},
		{Action: "run", Package: "p/a", Test: "TestSkip"},
		{Action: "skip", Package: "p/a", Test: "TestSkip"},
		{Action: "pass", Package: "p/a", Elapsed: 1.5},
		{Action: "start", Package: "p/b"},
		{Action: "run", Package: "p/b", Test: "TestBad"},
		{Action: "output", Package: "p/b", Test: "TestBad", Output: "    b_test.go:9: want 2\n"},
		{Action: "pass", Package: "p/b", Test: "TestBad/sub"},
		{Action: "fail", Package: "p/b", Test: "TestBad"},
		{Action: "output", Package: "p/b", Output: "--- FAIL: TestBad\n"},
		{Action: "fail", Package: "p/b", Elapsed: 2},
		{Action: "start", Package: "p/c"},
		{Action: "output", Package: "p/c", Output: "c.go:3: undefined: x\n"},
		{Action: "fail", Package: "p/c"},
	} {
		s.event(e)
	}
	if s.passed != 1 || s.failed != 2 || s.skipped != 1 {
		t.Errorf("passed %d, failed %d, skipped %d; want 1, 2 (TestBad and p/c's build), 1", s.passed, s.failed, s.skipped)
	}
	out := b.String()
	for _, want := range []string{"ok    p/a", "1.5s  2 tests", "--- FAIL: TestBad (p/b)\n    b_test.go:9: want 2\n", "FAIL  p/b", "FAIL  p/c", "c.go:3: undefined: x"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if len(s.running) != 0 {
		t.Errorf("still running: %v", s.running)
	}
}

// A package that hits go test's -timeout (a real go test -json run of a
// package in a temporary directory, -timeout 3s): the summary says it timed
// out, names the tests that were running (not those that had finished),
// shows their own output without the goroutine dump and counts the
// top-level ones as failed.
func TestSummaryTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/slow\n\ngo 1.22\n")
	write("slow_test.go", `package slow

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) {}

func TestHangs(t *testing.T) {
	t.Parallel()
	t.Log("hangs-own-output")
	time.Sleep(time.Hour)
}

func TestHangsInSub(t *testing.T) {
	t.Parallel()
	t.Run("sub", func(t *testing.T) { time.Sleep(time.Hour) })
}

func TestParallelDone(t *testing.T) { t.Parallel() }
`)
	// -parallel=8: at the default (GOMAXPROCS, 2 in CI) the two hanging
	// tests can hold both slots, and TestParallelDone never runs.
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "test", "-json", "-count=1", "-parallel=8", "-timeout", "3s", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, _ := cmd.Output() // exits 1: the timeout
	var b strings.Builder
	s := newSummary(&b)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			s.event(e)
		}
	}
	got := b.String()
	for _, want := range []string{
		"TIMED OUT after 3s (go test -timeout)",
		"running when it timed out: TestHangs, TestHangsInSub, TestHangsInSub/sub\n",
		"--- timed out: TestHangs\n",
		"hangs-own-output",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s\n(go test said:\n%s)", want, got, out)
		}
	}
	if strings.Contains(got, "goroutine ") || strings.Contains(got, "TestQuick") || strings.Contains(got, "unfinished") {
		t.Errorf("summary shows the goroutine dump, a finished test or 'unfinished':\n%s", got)
	}
	if s.passed != 2 || s.failed != 2 || len(s.timedOut) != 1 {
		t.Errorf("passed %d, failed %d, timed out %v; want 2, 2 (the running top-level tests), [example.com/slow]", s.passed, s.failed, s.timedOut)
	}
}

// A timed-out package whose parallel tests had not all started: the
// summary counts those as not started, neither running nor failed.
func TestSummaryTimeoutWaiting(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b)
	for _, e := range []event{
		{Action: "start", Package: "p/a"},
		{Action: "run", Package: "p/a", Test: "TestRuns"},
		{Action: "pause", Package: "p/a", Test: "TestRuns"},
		{Action: "run", Package: "p/a", Test: "TestWaits"},
		{Action: "pause", Package: "p/a", Test: "TestWaits"},
		{Action: "cont", Package: "p/a", Test: "TestRuns"},
		{Action: "output", Package: "p/a", Test: "TestRuns", Output: "    a_test.go:5: step 1\n"},
		{Action: "output", Package: "p/a", Test: "TestRuns", Output: timeoutPanic + "9m0s\n"},
		{Action: "output", Package: "p/a", Test: "TestRuns", Output: "\trunning tests:\n"},
		{Action: "output", Package: "p/a", Test: "TestRuns", Output: "\t\tTestRuns (8m59s)\n"},
		{Action: "output", Package: "p/a", Test: "TestRuns", Output: "\n"},
		{Action: "output", Package: "p/a", Test: "TestRuns", Output: "goroutine 1 [running]:\n"},
		{Action: "fail", Package: "p/a", Elapsed: 540},
	} {
		s.event(e)
	}
	out := b.String()
	for _, want := range []string{"TIMED OUT after 9m0s", "running when it timed out: TestRuns\n", "1 more tests had not started", "a_test.go:5: step 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "goroutine") || strings.Contains(out, "TestWaits") {
		t.Errorf("output shows the dump or the test that never started:\n%s", out)
	}
	if s.failed != 1 || s.passed != 0 {
		t.Errorf("passed %d, failed %d; want 0, 1", s.passed, s.failed)
	}
}

// TestSummaryTimeoutAfterPass replays go test's JSON from a busy machine:
// the timeout panic came after TestParallelDone printed "--- PASS" but
// before its pass event, so test2json gave the panic to that test.
func TestSummaryTimeoutAfterPass(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "timeout-after-pass.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	s := newSummary(&b)
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e event
		if json.Unmarshal(line, &e) == nil {
			s.event(e)
		}
	}
	got := b.String()
	for _, want := range []string{
		"TIMED OUT after 3s (go test -timeout)",
		"running when it timed out: TestHangs, TestHangsInSub, TestHangsInSub/sub\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if s.passed != 2 || s.failed != 2 || len(s.timedOut) != 1 {
		t.Errorf("passed %d, failed %d, timed out %v; want 2, 2, [example.com/slow]:\n%s", s.passed, s.failed, s.timedOut, got)
	}
}

// replay feeds a recorded go test -json stream, up to its line stop (all
// with stop < 0), to a summary and returns it with what it printed.
func replay(t *testing.T, file string, stop int) (*summary, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	if stop >= 0 {
		lines = lines[:stop]
	}
	var b strings.Builder
	s := newSummary(&b)
	for _, line := range lines {
		var e event
		if json.Unmarshal(line, &e) == nil {
			s.event(e)
		}
	}
	return s, b.String()
}

// A package that go test killed a minute past its -timeout, without the
// testing package's report (recorded from a real run: a test binary whose
// own alarm was off, as when TestMain or a starved machine keeps it from
// firing): the summary says it timed out, names the tests that were
// running (not the finished one), counts the one waiting for a -parallel
// slot, and shows their own output without the SIGQUIT goroutine dump.
func TestSummaryKilledRanTooLong(t *testing.T) {
	s, got := replay(t, "killed-ran-too-long.json", -1)
	for _, want := range []string{
		"TIMED OUT: go test killed it (*** Test killed with quit: ran too long (1m1s).)",
		"running when it timed out: TestHangs, TestWaits\n",
		"1 more tests had not started",
		"--- timed out: TestHangs\n",
		"hangs-own-output",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "SIGQUIT") || strings.Contains(got, "goroutine ") || strings.Contains(got, "TestQuick") {
		t.Errorf("summary shows the goroutine dump or a finished test:\n%s", got)
	}
	if s.passed != 1 || s.failed != 2 || len(s.timedOut) != 1 {
		t.Errorf("passed %d, failed %d, timed out %v; want 1, 2 (the running top-level tests), [example.com/killed]", s.passed, s.failed, s.timedOut)
	}
}

// A stream that ends before its package's result (go test itself killed):
// the summary names the tests still running and counts them and the
// package as failed.
func TestSummaryNoResult(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "killed-ran-too-long.json"))
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(data, []byte("SIGQUIT: quit"))
	stop := bytes.Count(data[:cut], []byte("\n"))
	s, _ := replay(t, "killed-ran-too-long.json", stop)
	var b strings.Builder
	s.out = &b
	s.mu.Lock()
	s.noResult()
	s.mu.Unlock()
	got := b.String()
	for _, want := range []string{
		"example.com/killed",
		"no result: go test ended before it did",
		"still running then: TestHangs, TestWaits\n",
		"1 more tests had not started",
		"--- unfinished: TestHangs\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if s.failed != 3 || len(s.failedPkgs) != 1 {
		t.Errorf("failed %d, failed packages %v; want 3 (two tests and the package), [example.com/killed]", s.failed, s.failedPkgs)
	}
}
