package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/lease"
)

// --slots N: up to N instances hold the lease at once (lease.Request.Slots).

// Variables of a run with slots. The child gets its slot (0-based) and the
// number of slots under names that are not --slots's own variable, so that
// a leaderrun started by the child does not take the outer lease's number
// as its own.
const (
	envSlotsConfig = "LEADERRUN_SLOTS"
	envSlot        = "LEADERRUN_SLOT"
	envLeaseSlots  = "LEADERRUN_LEASE_SLOTS"
)

// parseSlots reads --slots and refuses what it cannot be combined with.
func parseSlots(c *cli.Context, rc runConfig) (int, error) {
	n := c.Int("slots")
	if n < 1 || n > lease.MaxSlots {
		return 0, usagef("--slots %d: want a whole number from 1 to %d", n, lease.MaxSlots)
	}
	if lease.SlotHolder(lease.Holder{Label: rc.holder}).Slots != 0 {
		// The store records a slot's holder as "LABEL (slot K of N)".
		return 0, usagef("--holder %q ends like the label of a slot's holder, \"(slot K of N)\"; choose another", rc.holder)
	}
	if n > 1 && rc.oncePer.on {
		return 0, usagef("--slots %d with --once-per: a job run once per period has one holder; leave out one of them", n)
	}
	return n, nil
}

// slotEnviron gives the child its slot: env without any inherited slot
// variables (and without --slots's own, unless keep names it), plus
// LEADERRUN_SLOT and LEADERRUN_LEASE_SLOTS when the lease has slots.
func slotEnviron(env []string, keep map[string]bool, info lease.Holder) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == envSlot || k == envLeaseSlots || k == envSlotsConfig && !keep[k] {
			continue
		}
		out = append(out, kv)
	}
	if info.Slots > 1 {
		out = append(out, envSlot+"="+strconv.Itoa(info.Slot), envLeaseSlots+"="+strconv.Itoa(info.Slots))
	}
	return out
}

// slotsConflictText is the final line of a run that found every slot held.
func slotsConflictText(rc runConfig, by lease.Holder, waited string) string {
	return fmt.Sprintf("all %d slots of lease %s are held (slot %d %s)%s; %s not started", by.Slots, rc.name, by.Slot, heldBy(by, time.Now()), waited, rc.args[0])
}

// withSlots completes a view of lease name read by readView when the lease
// has (or may have) slots: the holder of each held slot, and their number.
// A lease taken without slots costs one more read when it is free, none
// when it is held.
func withSlots(ctx context.Context, store lease.Store, name string, v leaseView) (leaseView, error) {
	if v.holder != nil && lease.SlotHolder(*v.holder).Slots <= 1 {
		return v, nil
	}
	hs, n, err := lease.SlotStatus(ctx, store, name, 0)
	if err != nil || n <= 1 {
		return v, err
	}
	v.slots, v.nslots, v.holder = hs, n, nil
	if len(hs) > 0 {
		v.holder = &hs[0]
	}
	return v, nil
}

// slotJSON is one held slot in status --json and watch --json.
type slotJSON struct {
	Slot        int        `json:"slot"`
	Holder      string     `json:"holder"`
	Token       uint64     `json:"token,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	RemainingMS int64      `json:"remaining_ms,omitempty"`
	HeldUntil   *time.Time `json:"held_until,omitempty"`
}

func newSlotJSON(h lease.Holder) slotJSON {
	out := slotJSON{Slot: h.Slot, Holder: h.Label, Token: h.Token, RemainingMS: h.Remaining.Milliseconds()}
	if !h.Since.IsZero() {
		out.Since = &h.Since
	}
	if !h.HeldUntil.IsZero() {
		out.HeldUntil = &h.HeldUntil
	}
	return out
}

// slotsJSON fills status's slot fields.
func slotsJSON(out *statusJSON, v leaseView) {
	if v.nslots <= 1 {
		return
	}
	out.Slots = v.nslots
	out.Holders = []slotJSON{}
	for _, h := range v.slots {
		out.Holders = append(out.Holders, newSlotJSON(h))
	}
}

// printSlots writes status's lines for a lease with slots: how many are
// held, then one line per held slot.
func printSlots(w io.Writer, name string, v leaseView, now time.Time) {
	fmt.Fprintf(w, "%s: %d of %d slots held\n", name, len(v.slots), v.nslots)
	for _, h := range v.slots {
		fmt.Fprintf(w, "  slot %d: %s\n", h.Slot, slotHolderText(h, now))
	}
}

func slotHolderText(h lease.Holder, now time.Time) string {
	s := heldBy(h, now)
	if h.HeldUntil.IsZero() && h.Remaining > 0 {
		s += fmt.Sprintf(", expires in %v unless renewed", h.Remaining.Round(100*time.Millisecond))
	}
	return s
}

// printSlotChanges prints, for watch, each slot whose holder changed from
// last to v (all of them on the first view, when last has none); it
// reports whether anything was printed.
func printSlotChanges(p watchPrinter, last, v leaseView, first bool) bool {
	n := max(last.nslots, v.nslots)
	was, now := slotKeys(last), slotKeys(v)
	changed := false
	for k := range n {
		if !first && was[k] == now[k] {
			continue
		}
		changed = true
		var h *lease.Holder
		for i := range v.slots {
			if v.slots[i].Slot == k {
				h = &v.slots[i]
			}
		}
		p.slot(k, n, h)
	}
	return changed
}

func slotKeys(v leaseView) map[int]string {
	m := map[int]string{}
	for i := range v.slots {
		m[v.slots[i].Slot] = holderKey(&v.slots[i])
	}
	return m
}

// slot prints watch's line for slot k of n: its holder, or free.
func (p watchPrinter) slot(k, n int, h *lease.Holder) {
	now := time.Now()
	if p.asJSON {
		out := struct {
			Time  time.Time `json:"time"`
			Name  string    `json:"name"`
			Event string    `json:"event"`
			Slots int       `json:"slots"`
			Held  bool      `json:"held"`
			slotJSON
		}{Time: now, Name: p.name, Event: "slot", Slots: n, slotJSON: slotJSON{Slot: k}}
		if h != nil {
			out.Held, out.slotJSON = true, newSlotJSON(*h)
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(p.e.stdio.Out, string(b))
		return
	}
	if h == nil {
		fmt.Fprintf(p.e.stdio.Out, "%s %s: slot %d of %d free\n", p.stamp(now), p.name, k, n)
		return
	}
	line := fmt.Sprintf("%s %s: slot %d of %d held by %s", p.stamp(now), p.name, k, n, holderName(h.Label))
	if h.Token != 0 {
		line += fmt.Sprintf(", token %d", h.Token)
	}
	fmt.Fprintln(p.e.stdio.Out, line)
}

// runLabel is the holder label of a run's history record: with slots, the
// label the store records, which names the slot ("web-1:42 (slot 2 of 3)").
func runLabel(info lease.Holder) string {
	if info.Slots > 1 {
		return lease.SlotLabel(info.Label, info.Slot, info.Slots)
	}
	return info.Label
}

// slotAttrs are the log attributes of a slot: none without slots.
func slotAttrs(info lease.Holder) []any {
	if info.Slots <= 1 {
		return nil
	}
	return []any{"slot", info.Slot, "slots", info.Slots}
}

// statusLastRun is status's last run: lastRun, or, for a lease with slots,
// the newest run that is none of the current holders'.
func statusLastRun(ctx context.Context, store lease.Store, name string, current uint64, v leaseView) *lease.Run {
	if v.nslots <= 1 {
		return lastRun(ctx, store, name, current)
	}
	h, ok := store.(lease.History)
	if !ok {
		return nil
	}
	runs, err := h.Runs(ctx, name, len(v.slots)+1)
	if err != nil {
		return nil
	}
	running := map[uint64]bool{}
	for _, s := range v.slots {
		if s.HeldUntil.IsZero() {
			running[s.Token] = true
		}
	}
	for _, r := range runs {
		if !running[r.Token] {
			return &r
		}
	}
	return nil
}
