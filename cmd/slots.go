package cmd

import (
	"strconv"
	"strings"

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

// slotsFlag is --slots.
func slotsFlag() cli.Flag {
	return &cli.IntFlag{Name: "slots", Value: 1, EnvVars: []string{envSlotsConfig}, Usage: "let up to `N` instances hold the lease at once, each in a slot of its own with its own fencing token; the child gets its slot, 0 to N-1, in LEADERRUN_SLOT (every contender must give the same N)"}
}

// parseSlots reads --slots and refuses what it cannot be combined with.
func parseSlots(c *cli.Context, rc runConfig) (int, error) {
	n := c.Int("slots")
	if n < 1 || n > lease.MaxSlots {
		return 0, usagef("--slots %d: want a whole number from 1 to %d", n, lease.MaxSlots)
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
