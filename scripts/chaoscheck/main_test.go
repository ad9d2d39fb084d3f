package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// logs builds a chaos log directory from records, by file.
type logs map[string][]map[string]any

func start(t int64, pid, wrapper int, token uint64) map[string]any {
	return map[string]any{"ev": "start", "t": t, "pid": pid, "wrapper": wrapper, "token": token, "contender": "c00"}
}
func end(t int64, pid int, reason string) map[string]any {
	return map[string]any{"ev": "end", "t": t, "pid": pid, "reason": reason}
}
func write(t int64, pid int, token uint64, ok bool) map[string]any {
	return map[string]any{"ev": "write", "t": t, "pid": pid, "token": token, "ok": ok}
}
func wrapStart(t int64, pid int) map[string]any {
	return map[string]any{"ev": "wrap_start", "t": t, "pid": pid}
}
func wrapExit(t int64, pid, code int) map[string]any {
	return map[string]any{"ev": "wrap_exit", "t": t, "pid": pid, "code": code}
}
func faultRec(t int64, kind string, pid int, phase string) map[string]any {
	return map[string]any{"ev": "fault", "t": t, "kind": kind, "pid": pid, "phase": phase}
}

// lostFirstLogs is child 11 (leaderrun 1, token 5), which starts at 1.1 s
// and ends at aEnd, after child 12 (leaderrun 2, token 6) started at
// 1.05 s, and a key delete from 1 s to 1.005 s whose answer names tokens.
// The fencing resource refuses 11's write, 12 having written first.
func lostFirstLogs(aEnd int64, tokens ...uint64) logs {
	done := faultRec(1005*ms, "key_delete", 0, "done")
	if tokens != nil {
		done["tokens"] = tokens
	}
	return logs{
		"runs.log":   {start(1050*ms, 12, 2, 6), start(1100*ms, 11, 1, 5), end(aEnd, 11, "signal terminated"), end(6000*ms, 12, "done")},
		"fence.log":  {write(1060*ms, 12, 6, true), write(1110*ms, 11, 5, false), write(1200*ms, 12, 6, true)},
		"faults.log": {faultRec(1000*ms, "key_delete", 0, "begin"), done},
	}
}

func (l logs) dir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	m, _ := json.Marshal(map[string]any{"store": "redis", "ttl_ns": 3000 * ms, "contenders": 2, "duration": "10s", "start": 0})
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	for file, recs := range l {
		var b strings.Builder
		for _, r := range recs {
			j, _ := json.Marshal(r)
			b.Write(j)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// twoRuns is child 11 (leaderrun 1, token tokA) then child 12 (leaderrun 2,
// token tokB), B starting at bStart while A's last sign of life is aLast.
func twoRuns(tokA, tokB uint64, aLast, bStart int64) logs {
	return logs{
		"runs.log": {start(100*ms, 11, 1, tokA), end(aLast, 11, "done"), start(bStart, 12, 2, tokB), end(bStart+500*ms, 12, "done")},
		"fence.log": {write(110*ms, 11, tokA, true), write(bStart+10*ms, 12, tokB, tokB >= tokA),
			write(bStart+400*ms, 12, tokB, tokB >= tokA)},
		"wrappers.log": {wrapStart(50*ms, 1), wrapStart(60*ms, 2), wrapExit(aLast+5*ms, 1, 0), wrapExit(bStart+600*ms, 2, 0)},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		logs logs
		want map[string]int // Report fields by JSON name
		fail string         // substring of a failure, "" = must pass
	}{
		{
			name: "clean handover",
			logs: twoRuns(1, 2, 400*ms, 410*ms),
			want: map[string]int{"runs_started": 2, "runs_completed": 2, "overlaps": 0, "token_violations": 0, "writes_accepted": 3},
		},
		{
			name: "overlap without a cause",
			logs: twoRuns(1, 2, 900*ms, 410*ms),
			want: map[string]int{"overlaps": 1, "overlaps_unexplained": 1},
			fail: "unexplained overlap",
		},
		{
			name: "token goes back",
			logs: twoRuns(5, 1, 400*ms, 410*ms),
			want: map[string]int{"token_violations": 1, "token_resets": 1, "newest_leader_writes_rejected": 2},
			fail: "token went back",
		},
		{
			name: "orphan",
			logs: func() logs {
				l := twoRuns(1, 2, 400*ms, 410*ms)
				l["wrappers.log"][2] = wrapExit(300*ms, 1, 137)
				return l
			}(),
			want: map[string]int{"orphans": 1},
			fail: "orphan",
		},
		{
			name: "no runs",
			logs: logs{},
			want: map[string]int{"runs_started": 0},
			fail: "no child ever ran",
		},
		{
			// A's leaderrun frozen for 4 s > TTL; B starts during the pause;
			// A's child writes once more after B did, and is fenced off.
			name: "overlap after a long pause, fenced",
			logs: logs{
				"runs.log": {start(100*ms, 11, 1, 7), start(3500*ms, 12, 2, 8), end(4300*ms, 11, "signal terminated"), end(5000*ms, 12, "done")},
				"fence.log": {write(110*ms, 11, 7, true), write(3510*ms, 12, 8, true), write(3600*ms, 11, 7, false),
					write(4000*ms, 12, 8, true)},
				"faults.log": {faultRec(200*ms, "holder_pause_long", 1, "stop"), faultRec(4200*ms, "holder_pause_long", 1, "cont")},
			},
			want: map[string]int{"overlaps": 1, "overlaps_pause": 1, "overlaps_unexplained": 0, "stale_writes_rejected": 1, "faults_total": 1},
		},
		{
			// The same with a pause shorter than the TTL: not a documented cause.
			name: "overlap after a short pause",
			logs: logs{
				"runs.log":   {start(100*ms, 11, 1, 7), start(1500*ms, 12, 2, 8), end(2300*ms, 11, "done"), end(3000*ms, 12, "done")},
				"faults.log": {faultRec(200*ms, "holder_pause_short", 1, "stop"), faultRec(1700*ms, "holder_pause_short", 1, "cont")},
			},
			want: map[string]int{"overlaps_pause": 0, "overlaps_unexplained": 1},
			fail: "unexplained overlap",
		},
		{
			// The key is deleted; B (whose token went back to 1) starts at
			// once; A's writes are then accepted over B's: stale writes.
			name: "store lost the lease and the token went back",
			logs: logs{
				"runs.log": {start(100*ms, 11, 1, 5), start(1010*ms, 12, 2, 1), end(1800*ms, 11, "signal terminated"), end(2000*ms, 12, "done")},
				"fence.log": {write(110*ms, 11, 5, true), write(1020*ms, 12, 1, false), write(1100*ms, 11, 5, true),
					write(1500*ms, 12, 1, false)},
				"faults.log": {faultRec(1000*ms, "key_delete", 0, "")},
			},
			want: map[string]int{"overlaps_lost": 1, "overlaps_unexplained": 0, "token_violations": 1, "stale_writes_accepted": 1, "newest_leader_writes_rejected": 2},
			fail: "stale write accepted",
		},
		{
			// The key is deleted just after A's leaderrun acquired it, before
			// A's child logged its start.
			name: "store lost a fresh lease",
			logs: logs{
				"runs.log":   {start(1005*ms, 11, 1, 5), start(1010*ms, 12, 2, 6), end(1300*ms, 11, "signal terminated"), end(2000*ms, 12, "done")},
				"faults.log": {faultRec(1000*ms, "key_delete", 0, "")},
			},
			want: map[string]int{"overlaps_lost": 1, "overlaps_unexplained": 0},
		},
		{
			// kubectl began the delete 1.1 s before A's child started (past
			// the slack) but deleted the record only after A acquired it: B
			// then created it afresh. The change lasts until its answer
			// (done), so the overlap is explained by it.
			name: "a slow delete lost a lease taken after it began",
			logs: logs{
				"runs.log":   {start(2100*ms, 11, 1, 5), start(2480*ms, 12, 2, 6), end(2510*ms, 11, "signal terminated"), end(3000*ms, 12, "done")},
				"faults.log": {faultRec(1000*ms, "key_delete", 0, "begin"), faultRec(2300*ms, "key_delete", 0, "done")},
			},
			want: map[string]int{"overlaps_lost": 1, "overlaps_unexplained": 0, "faults_total": 1},
		},
		{
			// The same delete answered at once explains nothing a second
			// and more later.
			name: "a prompt delete long before the overlap",
			logs: logs{
				"runs.log":   {start(2100*ms, 11, 1, 5), start(2480*ms, 12, 2, 6), end(2510*ms, 11, "signal terminated"), end(3000*ms, 12, "done")},
				"faults.log": {faultRec(1000*ms, "key_delete", 0, "begin"), faultRec(1010*ms, "key_delete", 0, "done")},
			},
			want: map[string]int{"overlaps_lost": 0, "overlaps_unexplained": 1, "faults_total": 1},
			fail: "unexplained overlap",
		},
		{
			// A acquired (token 5) and was slow to start its child; the key
			// was deleted meanwhile, B took it afresh (token 6) and started
			// first. The fencing resource, at 6, refuses A: A is the older
			// leader, though its child started later. The delete's answer
			// names the token it removed.
			name: "store lost a lease before its child started",
			logs: lostFirstLogs(1500*ms, 5),
			want: map[string]int{"overlaps_lost": 1, "overlaps_unexplained": 0, "token_violations": 0, "tokens_lost_first": 1,
				"stale_writes_accepted": 0, "stale_writes_rejected": 1, "newest_leader_writes_rejected": 0},
		},
		{
			// The same, where the delete does not say whose lease it
			// removed: A might have acquired after it, with a token that
			// went back.
			name: "a lease lost before its child started, token unknown",
			logs: lostFirstLogs(1500 * ms),
			want: map[string]int{"token_violations": 1, "tokens_lost_first": 0, "stale_writes_accepted": 1},
			fail: "token went back",
		},
		{
			// The delete removed another lease than A's (token 4): A's token
			// went back.
			name: "a lease lost before its child started, another token",
			logs: lostFirstLogs(1500*ms, 4),
			want: map[string]int{"token_violations": 1, "tokens_lost_first": 0},
			fail: "token went back",
		},
		{
			// A, whose lease was lost first, ran on well past a TTL after
			// the delete: not the holder that learns at its next renewal.
			name: "a lease lost before its child started, child not stopped",
			logs: lostFirstLogs(5500*ms, 5),
			want: map[string]int{"token_violations": 1, "tokens_lost_first": 0, "overlaps_unexplained": 1},
			fail: "token went back",
		},
		{
			// A restart without data that loses the lease long before the
			// overlap does not explain it.
			name: "overlap long after the store lost the lease",
			logs: logs{
				"runs.log":   {start(100*ms, 11, 1, 5), start(6000*ms, 12, 2, 6), end(6500*ms, 11, "done"), end(7000*ms, 12, "done")},
				"faults.log": {faultRec(200*ms, "store_restart_empty", 99, "kill"), faultRec(900*ms, "store_restart_empty", 98, "up")},
			},
			want: map[string]int{"overlaps_lost": 0, "overlaps_unexplained": 1, "faults_total": 1},
			fail: "unexplained overlap",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := check(tc.logs.dir(t))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(r)
			var got map[string]any
			_ = json.Unmarshal(b, &got)
			for k, v := range tc.want {
				if n, _ := got[k].(float64); int(n) != v {
					t.Errorf("%s = %v, want %d", k, got[k], v)
				}
			}
			all := strings.Join(r.Failures, "\n")
			switch {
			case tc.fail == "" && len(r.Failures) > 0:
				t.Errorf("unexpected failures:\n%s", all)
			case tc.fail != "" && !strings.Contains(all, tc.fail):
				t.Errorf("failures %q do not mention %q", all, tc.fail)
			}
			if t.Failed() {
				var sb strings.Builder
				r.print(&sb)
				fmt.Println(sb.String())
			}
		})
	}
}
