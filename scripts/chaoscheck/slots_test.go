package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// slotRun is one child of a run with slots: leaderrun wrapper forked at
// t0, child pid started at start in slot, alive until last, with token.
type slotRun struct {
	pid, wrapper, slot int
	t0, start, last    int64
	token              uint64
}

// slotLogs writes the logs of runs with 3 slots.
func slotLogs(t *testing.T, runs []slotRun) string {
	t.Helper()
	l := logs{}
	for _, r := range runs {
		s := start(r.start, r.pid, r.wrapper, r.token)
		s["slot"] = r.slot
		l["runs.log"] = append(l["runs.log"], s, end(r.last, r.pid, "done"))
		w := write(r.start+ms, r.pid, r.token, true)
		w["slot"] = r.slot
		l["fence.log"] = append(l["fence.log"], w)
		ws := wrapStart(r.t0+ms, r.wrapper)
		ws["t0"] = r.t0
		l["wrappers.log"] = append(l["wrappers.log"], ws, wrapExit(r.last+ms, r.wrapper, 0))
	}
	dir := l.dir(t)
	m, _ := json.Marshal(map[string]any{"store": "redis", "ttl_ns": 3000 * ms, "contenders": 4, "duration": "10s", "start": 0, "slots": 3})
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckSlots(t *testing.T) {
	tests := []struct {
		name string
		runs []slotRun
		fail string // "" = must pass
	}{
		{"three slots at once", []slotRun{
			{11, 1, 0, 10 * ms, 100 * ms, 900 * ms, 1}, {12, 2, 1, 20 * ms, 110 * ms, 900 * ms, 2}, {13, 3, 2, 30 * ms, 120 * ms, 900 * ms, 3},
			{14, 4, 0, 950 * ms, 1000 * ms, 1100 * ms, 4}}, ""},
		{"two in one slot", []slotRun{
			{11, 1, 1, 10 * ms, 100 * ms, 900 * ms, 1}, {12, 2, 1, 20 * ms, 200 * ms, 900 * ms, 2}}, "unexplained overlap"},
		{"a token twice", []slotRun{
			{11, 1, 0, 10 * ms, 100 * ms, 900 * ms, 5}, {12, 2, 1, 20 * ms, 110 * ms, 900 * ms, 5}}, "given twice"},
		{"a token back across slots", []slotRun{
			{11, 1, 0, 10 * ms, 100 * ms, 900 * ms, 7}, {12, 2, 1, 300 * ms, 400 * ms, 900 * ms, 6}}, "token went back across slots"},
		{"a slot out of range", []slotRun{
			{11, 1, 3, 10 * ms, 100 * ms, 900 * ms, 1}}, "slot 3 of 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := check(slotLogs(t, tc.runs))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(r.Failures, "\n")
			if tc.fail == "" && got != "" || tc.fail != "" && !strings.Contains(got, tc.fail) {
				t.Fatalf("failures %q; want %q", got, tc.fail)
			}
			if tc.fail == "" && r.MaxConcurrent != 3 {
				t.Fatalf("max concurrent %d; want 3", r.MaxConcurrent)
			}
		})
	}
}
