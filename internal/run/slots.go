package run

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/say"
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
func slotsConflictText(rc Config, by lease.Holder, waited string) string {
	return fmt.Sprintf("all %d slots of lease %s are held (slot %d %s)%s; %s not started", by.Slots, rc.Name, by.Slot, say.HeldBy(by, time.Now()), waited, rc.Args[0])
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
