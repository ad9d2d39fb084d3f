package main

import (
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
