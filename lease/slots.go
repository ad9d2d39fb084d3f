package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// MaxSlots bounds Request.Slots: a waiter watches every slot, and a status
// reads each of them.
const MaxSlots = 100

// ErrSlotsMismatch marks a contender whose number of slots (Request.Slots)
// differs from that of a holder it found: all contenders of a lease must
// agree on it. The concrete error also wraps ErrConfig.
var ErrSlotsMismatch = errors.New("contenders disagree on the number of slots")

// slotSep separates a lease name from its slot number in the name of a
// slot's own lease: '~' is outside ValidateName's alphabet, so no user
// names a slot, and every store keeps it as it is (a file name, a Redis
// key, a row, an etcd key, a blob name: '~' is unreserved in URLs).
const slotSep = "~"

// SlotName returns the name under which a store keeps slot k of lease name:
// name itself for slot 0 (so a lease taken with one slot is today's lease,
// byte for byte), name~k for the others.
func SlotName(name string, k int) string {
	if k == 0 {
		return name
	}
	return name + slotSep + strconv.Itoa(k)
}

// ParseSlotName splits the store name of a slot into the lease name and the
// slot number; ok is false for a plain lease name (slot 0's).
func ParseSlotName(s string) (name string, k int, ok bool) {
	i := strings.LastIndex(s, slotSep)
	if i < 0 {
		return s, 0, false
	}
	k, err := strconv.Atoi(s[i+1:])
	if err != nil || k < 1 || k >= MaxSlots || strconv.Itoa(k) != s[i+1:] {
		return s, 0, false
	}
	return s[:i], k, true
}

// ValidateStoreName accepts a lease name (ValidateName) or the store name of
// one of its slots (SlotName): what a store that checks names (the file
// store) must take.
func ValidateStoreName(s string) error {
	if name, _, ok := ParseSlotName(s); ok {
		return ValidateName(name)
	}
	return ValidateName(s)
}

// The number of slots a holder was started with travels in its label, as
// the store records it: "web-1:42 (slot 2 of 3)". Every store keeps a
// label, so no store's record or schema changes, a lease taken without
// slots keeps its label unchanged, and an older leaderrun's status shows
// the slot as part of the holder's name.
const (
	slotLabelOpen = " (slot "
	slotLabelOf   = " of "
)

// slotLabel is the label a holder of slot k of n records.
func SlotLabel(label string, k, n int) string {
	return fmt.Sprintf("%s%s%d%s%d)", label, slotLabelOpen, k, slotLabelOf, n)
}

// SlotHolder returns h with the slot its label records moved into Slot and
// Slots (and out of Label). A holder whose label records no slot is
// returned unchanged (Slots 0: a lease taken without slots).
func SlotHolder(h Holder) Holder {
	rest, ok := strings.CutSuffix(h.Label, ")")
	i := strings.LastIndex(rest, slotLabelOpen)
	if !ok || i < 0 {
		return h
	}
	ks, ns, ok := strings.Cut(rest[i+len(slotLabelOpen):], slotLabelOf)
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 2 || n > MaxSlots || k < 0 || k >= n || strconv.Itoa(k) != ks || strconv.Itoa(n) != ns {
		return h
	}
	h.Label, h.Slot, h.Slots = rest[:i], k, n
	return h
}

// slotsOf is the number of slots holder h was started with: 1 for a lease
// taken without slots, 0 when the store could not tell who holds it.
func slotsOf(h Holder) int {
	if h.Label == "" && h.Token == 0 {
		return 0
	}
	return max(SlotHolder(h).Slots, 1)
}

// mismatch returns the error of a contender asking for n slots that found
// holder h (of lease name), or nil when they agree or h's number is unknown.
func mismatch(name string, h Holder, n int) error {
	got := slotsOf(h)
	if got == 0 || got == max(n, 1) {
		return nil
	}
	sh := SlotHolder(h)
	return NewError(fmt.Sprintf("lease %s is held by %s with %s; this contender asks for %s: all contenders of a lease must give the same number of slots",
		name, sh.Label, slotsText(got), slotsText(max(n, 1))), ErrSlotsMismatch, ErrConfig)
}

func slotsText(n int) string {
	if n == 1 {
		return "1 slot (no --slots)"
	}
	return fmt.Sprintf("%d slots", n)
}

// attemptSlots is one attempt of an Acquire with Request.Slots above 1: it
// tries each slot in turn (from the one whose answer was lost, if any, so
// that a granted attempt is reclaimed by its ID), and takes the first free
// one. When every usable slot is held it returns a *HeldError for the
// first held slot's holder and remembers each slot's answer for the wait.
// A slot the store refuses with ErrConfig (a file planted under its lock
// file's name) is left out, with a warning, so that it takes only itself
// away; the attempt fails with that error only when no slot is usable.
func (a *acquisition) attemptSlots() (Lease, error) {
	n := a.req.Slots
	held := make([]*HeldError, n)
	var broken error
	start := max(a.unknownSlot, 0)
	for i := range n {
		k := (start + i) % n
		req := a.req
		req.Name, req.Label = SlotName(a.req.Name, k), SlotLabel(a.req.Label, k, n)
		l, err := a.try(req)
		var he *HeldError
		switch {
		case err == nil:
			a.unknownSlot = -1
			if err := a.checkSlots(k, held); err != nil {
				_ = l.Release(context.WithoutCancel(a.ctx))
				return nil, err
			}
			return &slotLease{Lease: l, name: a.req.Name, slot: k, slots: n}, nil
		case errors.As(err, &he):
			if a.unknownSlot == k {
				a.unknownSlot = -1 // a definite answer: our attempt was not granted
			}
			if err := mismatch(a.req.Name, he.By, n); err != nil {
				return nil, err
			}
			held[k] = he
		case errors.Is(err, ErrUnavailable):
			a.unknownSlot = k
			return nil, err
		case errors.Is(err, ErrConfig) && !errors.Is(err, ErrSlotsMismatch) && !errors.Is(err, ErrTokenAhead):
			if broken == nil {
				broken = err
			}
			if a.brokenSlots == nil {
				a.brokenSlots = map[int]bool{}
			}
			if !a.brokenSlots[k] {
				a.brokenSlots[k] = true
				a.o.Log.Warn(fmt.Sprintf("slot %d of lease %s cannot be used; trying the other slots", k, a.req.Name), "err", err)
			}
		default:
			return nil, err
		}
	}
	a.slotHeld = held
	for _, he := range held {
		if he != nil {
			by := SlotHolder(he.By)
			by.Name, by.Slots = a.req.Name, n
			return nil, &HeldError{By: by}
		}
	}
	return nil, broken // every slot unusable
}

// checkSlots looks, after slot k was taken, at the slots this attempt did
// not find held (and slot n, the first beyond): a holder there with another
// number of slots means the contenders disagree. Unreadable slots are
// skipped: the check only catches a misconfiguration early.
func (a *acquisition) checkSlots(k int, held []*HeldError) error {
	for j := 0; j <= a.req.Slots; j++ {
		if j == k || j < len(held) && held[j] != nil {
			continue
		}
		h, err := a.status(SlotName(a.req.Name, j))
		if err != nil || h == nil {
			continue
		}
		if err := mismatch(a.req.Name, *h, a.req.Slots); err != nil {
			return err
		}
	}
	return nil
}

// status reads the holder of a slot, bounded by the call timeout.
func (a *acquisition) status(name string) (*Holder, error) {
	cctx, cancel := a.ctx, context.CancelFunc(func() {})
	if a.o.CallTimeout > 0 {
		cctx, cancel = context.WithTimeout(a.ctx, a.o.CallTimeout)
	}
	defer cancel()
	return a.s.Status(cctx, name)
}

// MultiWaiter is an optional capability of a Store: one wait for several
// leases at once (the slots of a lease), cheaper than a Wait for each (the
// file store watches every lock file on one inotify instance).
type MultiWaiter interface {
	// WaitAny is Wait for the leases names, whose last attempts reported
	// held: it returns nil when any of them may have become free.
	WaitAny(ctx context.Context, names []string, held []*HeldError) error
}

// wait is the store's Wait for the lease, or, with slots, for whichever
// slot may become free first: the store's WaitAny where it has one, else
// one Wait per slot, each on its own goroutine, the first to return ending
// the others.
func (a *acquisition) wait(ctx context.Context, held *HeldError) error {
	if a.req.Slots <= 1 || len(a.slotHeld) != a.req.Slots {
		return a.s.Wait(ctx, a.req.Name, held)
	}
	// Slots left out as unusable are not waited for.
	var names []string
	var hs []*HeldError
	for k, h := range a.slotHeld {
		if h != nil {
			names, hs = append(names, SlotName(a.req.Name, k)), append(hs, h)
		}
	}
	if mw, ok := a.s.(MultiWaiter); ok {
		return mw.WaitAny(ctx, names, hs)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- a.s.Wait(wctx, names[i], h)
		}()
	}
	err := <-errs
	cancel()
	wg.Wait()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// slotLease is the lease of one slot: the store's lease of the slot's own
// name, shown as the lease name with its slot. Every other capability of
// the store's lease is found through Unwrap (As).
type slotLease struct {
	Lease
	name        string
	slot, slots int
}

// Info returns the slot's record under the lease name, with Slot and Slots.
func (l *slotLease) Info() Holder {
	h := SlotHolder(l.Lease.Info())
	h.Name, h.Slot, h.Slots = l.name, l.slot, l.slots
	return h
}

// Unwrap returns the store's own lease of the slot.
func (l *slotLease) Unwrap() Lease { return l.Lease }

// SlotLister is an optional capability of a Store: the slots of a lease
// it keeps anything for, in one cheap look (the file store lists its
// directory), so that SlotStatus need not read every possible slot.
type SlotLister interface {
	// ListSlots returns the slots k ≥ 1 of lease name that the store has an
	// object for, held or not, in increasing order; every other slot is
	// free.
	ListSlots(ctx context.Context, name string) ([]int, error)
}

// slotReaders bounds the concurrent reads of SlotStatus.
const slotReaders = 8

// SlotStatus returns the holder of each held slot of lease name, in slot
// order, with Slot and Slots set, and the number of slots its holders were
// started with (1 for a lease taken without slots; 0 when nothing is
// held). slots, when above 1, is how many slots to read. With 0, the
// number comes from the holders: slot 0's when it is held by a known
// holder, else every slot that may exist is read (the ones the store's
// ListSlots names, or all MaxSlots), since holders take the lowest free
// slot only at the moment they start: slots 0 and 1 can be free while
// slots 2 and 3 run.
func SlotStatus(ctx context.Context, s Store, name string, slots int) ([]Holder, int, error) {
	var ks []int
	if slots > 1 {
		ks = seq(0, slots)
	} else {
		var single *Holder
		var err error
		if ks, single, err = slotsToRead(ctx, s, name); err != nil {
			return nil, 0, err
		}
		if single != nil {
			return []Holder{*single}, 1, nil // a lease taken without slots
		}
	}
	found, err := readSlots(ctx, s, name, ks)
	if err != nil {
		return nil, 0, err
	}
	if len(found) > 0 && found[0].Slot == 0 && found[0].Slots == 0 && found[0].Label != "" {
		return found[:1], 1, nil // a lease taken without slots, after all
	}
	n := slots
	for _, h := range found {
		if n <= 1 && h.Slots > 1 {
			n = h.Slots // the first known holder's: slot order
		}
	}
	var out []Holder
	for _, h := range found {
		if n > 1 && h.Slot >= n {
			continue // a contender that disagrees on the number, beyond it
		}
		out = append(out, h)
	}
	switch {
	case len(out) == 0:
		n = 0
	case n <= 1:
		// Held only by holders that do not say their number (a holder
		// between its lock and its record, a foreign lock): as many slots
		// as the highest held one shows.
		n = max(out[len(out)-1].Slot+1, 1)
	}
	return out, n, nil
}

// slotsToRead returns the slots of name to read when their number is not
// known: slot 0's holder's number, else the slots the store lists, else
// every slot that may exist. single is slot 0's holder when the lease was
// taken without slots.
func slotsToRead(ctx context.Context, s Store, name string) (ks []int, single *Holder, err error) {
	h, err := s.Status(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if h != nil {
		sh := SlotHolder(*h)
		if sh.Slots == 0 && h.Label != "" {
			sh.Name, sh.Slot = name, 0
			return nil, &sh, nil
		}
		if sh.Slots > 1 {
			return seq(0, sh.Slots), nil, nil
		}
	}
	if l, ok := s.(SlotLister); ok {
		listed, err := l.ListSlots(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		return append([]int{0}, listed...), nil, nil
	}
	return seq(0, MaxSlots), nil, nil
}

func isSlotLister(s Store) bool { _, ok := s.(SlotLister); return ok }

func seq(from, to int) []int {
	out := make([]int, 0, to-from)
	for k := from; k < to; k++ {
		out = append(out, k)
	}
	return out
}

// readSlots reads the slots ks of lease name, up to slotReaders at once,
// and returns the held ones in slot order, with Name, Slot and Slots (0
// when the holder does not say) set.
func readSlots(ctx context.Context, s Store, name string, ks []int) ([]Holder, error) {
	hs := make([]*Holder, len(ks))
	errs := make([]error, len(ks))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(slotReaders, len(ks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				hs[i], errs[i] = s.Status(ctx, SlotName(name, ks[i]))
			}
		}()
	}
	for i := range ks {
		next <- i
	}
	close(next)
	wg.Wait()
	var out []Holder
	for i, h := range hs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if h == nil {
			continue
		}
		sh := SlotHolder(*h)
		sh.Name, sh.Slot = name, ks[i]
		out = append(out, sh)
	}
	return out, nil
}
