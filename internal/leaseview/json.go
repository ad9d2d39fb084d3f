package leaseview

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Status is the --json form of status: stable field names for scripts.
type Status struct {
	Name        string     `json:"name"`
	Held        bool       `json:"held"`
	Holder      string     `json:"holder,omitempty"`
	Token       uint64     `json:"token,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	RemainingMS int64      `json:"remaining_ms,omitempty"`
	// HeldUntil is the end of a --hold-at-least hold: the holder is done.
	HeldUntil *time.Time `json:"held_until,omitempty"`
	// Standbys are the live waiting instances in takeover order; absent
	// from the output of watch.
	Standbys []Standby `json:"standbys,omitempty"`
	// LastRun is the newest run in the store's history other than the
	// current holder's; absent from the output of watch, and when none is
	// recorded.
	LastRun *Run `json:"last_run,omitempty"`
	// Unknown says the store knows nothing of the lease: free, with no
	// standby and no recorded run (status exits ExitStatusUnknown).
	Unknown bool `json:"unknown,omitempty"`
	// Slots is the number of slots of a lease taken with --slots, and
	// Holders the holder of each held slot.
	Slots   int    `json:"slots,omitempty"`
	Holders []Slot `json:"holders,omitempty"`
}

// Run is a run as history, check and status print it with --json: the
// fields of lease.Run, with a slot's holder said as status's holders[] say
// it ("holder":"web-1","slot":0,"slots":2, not "web-1 (slot 0 of 2)"),
// and "running":true for a current holder's run.
type Run struct {
	lease.Run
	Running bool
}

// RunOf is r as Run, not running; nil for nil.
func RunOf(r *lease.Run) *Run {
	if r == nil {
		return nil
	}
	return &Run{Run: *r}
}

// MarshalJSON writes r as lease.Run does (exit_code null without an end),
// the slot apart from the holder, and "running" when it is.
func (r Run) MarshalJSON() ([]byte, error) {
	run := r.Run
	h := lease.SlotHolder(lease.Holder{Label: run.Label})
	run.Label = h.Label
	b, err := json.Marshal(run)
	if err != nil {
		return b, err
	}
	extra := ""
	if h.Slots > 1 {
		extra = fmt.Sprintf(`,"slot":%d,"slots":%d`, h.Slot, h.Slots)
	}
	if r.Running {
		extra += `,"running":true`
	}
	return append(b[:len(b)-1], extra+"}"...), nil
}

// Standby is one waiting instance.
type Standby struct {
	Holder   string    `json:"holder"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
}

// NewStatus is status's answer for lease name: its view v and the last
// run (nil when none is recorded).
func NewStatus(name string, v View, last *lease.Run) Status {
	out := Status{Name: name, LastRun: RunOf(last)}
	if h := v.Holder; h != nil {
		out.Held, out.Holder, out.Token, out.RemainingMS = true, h.Label, h.Token, h.Remaining.Milliseconds()
		if !h.Since.IsZero() {
			since := h.Since
			out.Since = &since
		}
		if !h.HeldUntil.IsZero() {
			until := h.HeldUntil
			out.HeldUntil = &until
		}
	}
	for _, s := range v.Standbys {
		out.Standbys = append(out.Standbys, Standby{Holder: s.Label, Priority: s.Priority, Since: s.Since})
	}
	slotsJSON(&out, v) // --slots
	return out
}

// Slot is one held slot in status --json and watch --json.
type Slot struct {
	Slot        int        `json:"slot"`
	Holder      string     `json:"holder"`
	Token       uint64     `json:"token,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	RemainingMS int64      `json:"remaining_ms,omitempty"`
	HeldUntil   *time.Time `json:"held_until,omitempty"`
}

func NewSlot(h lease.Holder) Slot {
	out := Slot{Slot: h.Slot, Holder: h.Label, Token: h.Token, RemainingMS: h.Remaining.Milliseconds()}
	if !h.Since.IsZero() {
		out.Since = &h.Since
	}
	if !h.HeldUntil.IsZero() {
		out.HeldUntil = &h.HeldUntil
	}
	return out
}

// slotsJSON fills status's slot fields.
func slotsJSON(out *Status, v View) {
	if v.NSlots <= 1 {
		return
	}
	out.Slots = v.NSlots
	out.Holders = []Slot{}
	for _, h := range v.Slots {
		out.Holders = append(out.Holders, NewSlot(h))
	}
}
