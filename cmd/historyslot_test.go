package cmd

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

// TestSlotRunJSON: a run in a slot is printed by history, check and
// status --json with its holder as status's holders[] say it, the slot in
// fields of its own, not "web-1 (slot 1 of 3)" in "holder".
func TestSlotRunJSON(t *testing.T) {
	dir := t.TempDir()
	store, err := filelease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	start := time.Now().Add(-time.Minute).UTC()
	r := lease.Run{Name: "job", Label: "web-1 (slot 1 of 3)", Token: uint64(start.UnixMicro()), Start: start, End: start.Add(time.Second), Outcome: lease.OutcomeOK}
	if err := store.RecordRun(context.Background(), r, 0); err != nil {
		t.Fatal(err)
	}
	type runOut struct {
		Holder string `json:"holder"`
		Slot   *int   `json:"slot"`
		Slots  int    `json:"slots"`
	}
	check := func(what string, got runOut) {
		t.Helper()
		if got.Holder != "web-1" || got.Slot == nil || *got.Slot != 1 || got.Slots != 3 {
			t.Errorf("%s: holder %q, slot %v, slots %d; want web-1, 1, 3", what, got.Holder, got.Slot, got.Slots)
		}
	}
	storeURL := "file://" + dir
	_, out, _ := runCapture(t, "history", "--store", storeURL, "--json", "job")
	var runs []runOut
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 1 {
		t.Fatalf("history --json: %v: %s", err, out)
	}
	check("history --json", runs[0])
	_, out, _ = runCapture(t, "check", "--store", storeURL, "--json", "--ran-within", "1h", "job")
	var c struct{ Match, LastRun runOut }
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("check --json: %v: %s", err, out)
	}
	check("check --json match", c.Match)
	_, out, _ = runCapture(t, "status", "--store", storeURL, "--json", "job")
	var s struct {
		LastRun runOut `json:"last_run"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status --json: %v: %s", err, out)
	}
	check("status --json last_run", s.LastRun)
}
