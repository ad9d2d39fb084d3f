package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/leaderrun/leaderrun/internal/leaseview"
	"github.com/leaderrun/leaderrun/lease"
)

// Leases with slots (--slots) in status and watch: each held slot and its
// holder.

// printSlots writes status's lines for a lease with slots: how many are
// held, then one line per held slot.
func printSlots(w io.Writer, name string, v leaseview.View, now time.Time) {
	fmt.Fprintf(w, "%s: %d of %d slots held\n", name, len(v.Slots), v.NSlots)
	for _, h := range v.Slots {
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
func printSlotChanges(p watchPrinter, last, v leaseview.View, first bool) bool {
	n := max(last.NSlots, v.NSlots)
	was, now := slotKeys(last), slotKeys(v)
	changed := false
	for k := range n {
		if !first && was[k] == now[k] {
			continue
		}
		changed = true
		var h *lease.Holder
		for i := range v.Slots {
			if v.Slots[i].Slot == k {
				h = &v.Slots[i]
			}
		}
		p.slot(k, n, h)
	}
	return changed
}

func slotKeys(v leaseview.View) map[int]string {
	m := map[int]string{}
	for i := range v.Slots {
		m[v.Slots[i].Slot] = holderKey(&v.Slots[i])
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
			leaseview.Slot
		}{Time: now, Name: p.name, Event: "slot", Slots: n, Slot: leaseview.Slot{Slot: k}}
		if h != nil {
			out.Held, out.Slot = true, leaseview.NewSlot(*h)
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
