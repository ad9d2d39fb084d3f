// Package leaseview reads what the read-only commands (status, watch,
// history, check) show of a lease: its holder, the holders of its slots, its
// standbys and its recorded runs, and gives status's JSON form. Nothing here
// takes part in the lease's safety: a reader only looks.
package leaseview

import (
	"context"
	"slices"

	"github.com/leaderrun/leaderrun/lease"
)

// View is what status and watch show of a lease.
type View struct {
	// Holder is the holder, nil when the lease is free.
	Holder *lease.Holder
	// Standbys are the live standbys in takeover order (nil when there
	// are none or they could not be read).
	Standbys []lease.Candidate
	// Slots holds the held slots of a lease with --slots (NSlots above 1;
	// Holder is then the first of them), see withSlots.
	Slots  []lease.Holder
	NSlots int
}

// Read reads the holder and the standbys in one store call. A
// registry that cannot be read (say, a SAS without list permission) costs
// only the standbys. slots is the number of slots a previous view found
// (withSlots), 0 if none.
func Read(ctx context.Context, store lease.Store, name string, slots int) (View, error) {
	cs, h, err := store.Candidates(ctx, name)
	if err == nil {
		v, err := withSlots(ctx, store, name, View{Holder: h, Standbys: cs}, slots)
		v.Standbys = notHolding(v)
		return v, err
	}
	if ctx.Err() != nil {
		return View{Holder: h, Standbys: cs}, err
	}
	h, err = store.Status(ctx, name)
	if err != nil {
		return View{Holder: h}, err
	}
	return withSlots(ctx, store, name, View{Holder: h}, slots)
}

// notHolding is v's standbys without those that hold the lease or one of
// its slots: a standby that took it is a holder, though its registration
// may outlive the acquisition by a store call (seen on PostgreSQL: a slot's
// holder listed as its own standby). A standby is matched to a holder by
// acquisition ID, which its registration and its acquisition share, where
// the store tells the holder's; else by label (as watch matches one).
func notHolding(v View) []lease.Candidate {
	holders := append([]lease.Holder{}, v.Slots...)
	if v.Holder != nil && len(v.Slots) == 0 {
		holders = append(holders, *v.Holder)
	}
	return slices.DeleteFunc(v.Standbys, func(c lease.Candidate) bool {
		return slices.ContainsFunc(holders, func(h lease.Holder) bool {
			if h.ID != "" && c.ID != "" {
				return h.ID == c.ID
			}
			return lease.SlotHolder(h).Label == c.Label
		})
	})
}

// AnyRun reports whether the store's history may hold a run of name: it
// does, or it cannot be read (then nothing can be said either way). Only a history read without error that has no run says
// the store knows nothing of name.
func AnyRun(ctx context.Context, store lease.Store, name string) bool {
	runs, err := store.Runs(ctx, name, 1)
	return err != nil || len(runs) > 0
}

// withSlots completes a view of lease name read by Read when the lease
// has (or may have) slots: the holder of each held slot, and their number.
// A lease taken without slots costs nothing more when it is held; when it
// is free, a read of every slot the store may have (see lease.SlotStatus).
// slots, above 1, is the number a previous view found (watch): every slot
// is then read, so a slot's holder that has not written its record yet
// does not make the lease look like one without slots.
func withSlots(ctx context.Context, store lease.Store, name string, v View, slots int) (View, error) {
	if v.Holder != nil && slots <= 1 && lease.SlotHolder(*v.Holder).Slots <= 1 && (v.Holder.Label != "" || v.Holder.Token != 0) {
		return v, nil
	}
	hs, n, err := lease.SlotStatus(ctx, store, name, slots)
	if err != nil || n <= 1 {
		return v, err
	}
	v.Slots, v.NSlots, v.Holder = hs, n, nil
	if len(hs) > 0 {
		v.Holder = &hs[0]
	}
	return v, nil
}

// LastRun is status's last run: lastRun, or, for a lease with slots,
// the newest run that is none of the current holders'.
func LastRun(ctx context.Context, store lease.Store, name string, current uint64, v View) *lease.Run {
	if v.NSlots <= 1 {
		return lastRun(ctx, store, name, current)
	}
	runs, err := store.Runs(ctx, name, len(v.Slots)+1)
	if err != nil {
		return nil
	}
	running := map[uint64]bool{}
	for _, s := range v.Slots {
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

// lastRun returns the newest run of name that is not the current holder's
// (token current), or nil; best effort, as status's other parts.
func lastRun(ctx context.Context, store lease.Store, name string, current uint64) *lease.Run {
	runs, err := store.Runs(ctx, name, 2)
	if err != nil {
		return nil
	}
	for _, r := range runs {
		if r.Token != current {
			return &r
		}
	}
	return nil
}
