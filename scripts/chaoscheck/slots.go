package main

import (
	"fmt"
	"sort"
)

// bySlot splits runs (in start order) by slot, each in start order; a run
// without slots is one group.
func bySlot(runs []*run) [][]*run {
	idx := map[int]int{}
	var out [][]*run
	for _, x := range runs {
		i, ok := idx[x.Slot]
		if !ok {
			i = len(out)
			idx[x.Slot] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], x)
	}
	return out
}

// checkSlots checks what only a run with slots can get wrong: every child
// in a slot from 0 to N-1; no token given twice; and, across slots, each
// child's token above that of every child that started before its
// leaderrun was forked (that child's acquisition was over before this
// one's began). It also counts the most children alive at once, from
// their own stamps (start to last sign of life).
func (r *Report) checkSlots(order []*run, name func(*run) string, lastFault func(int64) string) {
	if r.Slots <= 1 {
		return
	}
	fail := func(msg string) {
		r.SlotViolations++
		if r.SlotViolations <= 5 {
			r.Failures = append(r.Failures, msg)
		}
	}
	seen := map[uint64]*run{}
	var high uint64 // the highest token of the children started so far
	var highRun *run
	started := 0 // order[:started] started before the current run's fork
	byT0 := append([]*run(nil), order...)
	sort.SliceStable(byT0, func(i, j int) bool { return byT0[i].wrapT0 < byT0[j].wrapT0 })
	for _, x := range byT0 {
		if x.Slot < 0 || x.Slot >= r.Slots {
			fail(fmt.Sprintf("%s ran in slot %d of %d", name(x), x.Slot, r.Slots))
		}
		if o := seen[x.Token]; o != nil {
			fail(fmt.Sprintf("token %d given twice: %s and %s", x.Token, name(o), name(x)))
		}
		seen[x.Token] = x
		if x.wrapT0 == 0 {
			continue
		}
		for ; started < len(order) && order[started].Start < x.wrapT0; started++ {
			if order[started].Token > high {
				high, highRun = order[started].Token, order[started]
			}
		}
		if highRun != nil && x.Token <= high {
			r.TokenViolations++
			fail(fmt.Sprintf("token went back across slots: %s, whose leaderrun was forked after %s started; %s", name(x), name(highRun), lastFault(x.Start)))
		}
	}
	r.MaxConcurrent = maxConcurrent(order)
	if r.MaxConcurrent > r.Slots && r.OverlapsUnexplained == 0 && r.Overlaps == 0 {
		fail(fmt.Sprintf("%d children alive at once with %d slots and no overlap in any slot", r.MaxConcurrent, r.Slots))
	}
}

// maxConcurrent is the most runs alive at once, each from its start to its
// last sign of life.
func maxConcurrent(runs []*run) int {
	type ev struct {
		t int64
		d int
	}
	evs := make([]ev, 0, 2*len(runs))
	for _, x := range runs {
		evs = append(evs, ev{x.Start, 1}, ev{x.Last, -1})
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].t < evs[j].t || evs[i].t == evs[j].t && evs[i].d < evs[j].d })
	most, cur := 0, 0
	for _, e := range evs {
		cur += e.d
		most = max(most, cur)
	}
	return most
}
