package leaseview

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Holding is the tokens of the holders running now: one for a lease,
// one per held slot with --slots.
type Holding map[uint64]bool

// Runs reads up to limit runs and the tokens of the current holders,
// every slot's (none when free or unreadable: only "running" depends on
// them).
func Runs(ctx context.Context, store lease.Store, h lease.History, name string, limit int) ([]lease.Run, Holding, error) {
	var (
		runs    []lease.Run
		current = Holding{}
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		hs, _, err := lease.SlotStatus(ctx, store, name, 0)
		for _, st := range hs {
			if err == nil && st.HeldUntil.IsZero() && st.Token != 0 {
				current[st.Token] = true
			}
		}
	}()
	runs, err := h.Runs(ctx, name, limit)
	wg.Wait()
	if err != nil {
		return nil, nil, fmt.Errorf("run history of lease %s: %w", name, err)
	}
	return runs, current, nil
}

// MatchRun returns the newest of runs (newest first) that started within
// within before now (and, with succeeded, ended with exit 0), and the newest
// run that started at all.
func MatchRun(runs []lease.Run, now time.Time, within time.Duration, succeeded bool) (match, last *lease.Run) {
	for i, r := range runs {
		// A run counts from now − within to now + the clock skew a store's
		// records may have (stores already drop those beyond it): a start
		// further ahead is no run, and never "0s ago" for ever.
		if r.Outcome == lease.OutcomeNotStarted || r.Start.After(now.Add(lease.MaxClockSkew)) {
			continue
		}
		if last == nil {
			last = &runs[i]
		}
		if r.Start.Before(now.Add(-within)) {
			break
		}
		if !succeeded || r.Outcome == lease.OutcomeOK {
			return &runs[i], last
		}
	}
	return nil, last
}

// running reports whether r is the run of a current holder.
func (c Holding) Running(r lease.Run) bool { return !r.Ended() && c[r.Token] }
