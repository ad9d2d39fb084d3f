package run

import (
	"slices"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// TestSlotEnviron: the child of a slot gets its slot and the number of
// slots, never the ones it inherited (a nested leaderrun's child is not in
// the outer lease's slot), and LEADERRUN_SLOTS only when it is this run's
// own configuration; a lease without slots adds nothing.
func TestSlotEnviron(t *testing.T) {
	inherited := []string{"PATH=/bin", "LEADERRUN_SLOT=2", "LEADERRUN_LEASE_SLOTS=3", "LEADERRUN_SLOTS=3"}
	for _, tc := range []struct {
		name string
		keep map[string]bool
		info lease.Holder
		want []string
	}{
		{"no slots", nil, lease.Holder{}, []string{"PATH=/bin"}},
		{"slot 1 of 2", nil, lease.Holder{Slot: 1, Slots: 2}, []string{"PATH=/bin", "LEADERRUN_SLOT=1", "LEADERRUN_LEASE_SLOTS=2"}},
		{"own LEADERRUN_SLOTS kept", map[string]bool{envSlotsConfig: true}, lease.Holder{Slot: 0, Slots: 3}, []string{"PATH=/bin", "LEADERRUN_SLOTS=3", "LEADERRUN_SLOT=0", "LEADERRUN_LEASE_SLOTS=3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := slotEnviron(slices.Clone(inherited), tc.keep, tc.info); !slices.Equal(got, tc.want) {
				t.Fatalf("slotEnviron = %q; want %q", got, tc.want)
			}
		})
	}
}
