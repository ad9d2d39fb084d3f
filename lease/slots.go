package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
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
// one. When every slot is held it returns a *HeldError for slot 0's holder
// and remembers each slot's answer for the wait.
func (a *acquisition) attemptSlots() (Lease, error) {
	n := a.req.Slots
	held := make([]*HeldError, n)
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
		default:
			return nil, err
		}
	}
	a.slotHeld = held
	by := SlotHolder(held[0].By)
	by.Name, by.Slots = a.req.Name, n
	return nil, &HeldError{By: by}
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
	if mw, ok := a.s.(MultiWaiter); ok {
		names := make([]string, len(a.slotHeld))
		for k := range names {
			names[k] = SlotName(a.req.Name, k)
		}
		return mw.WaitAny(ctx, names, a.slotHeld)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(a.slotHeld))
	var wg sync.WaitGroup
	for k, h := range a.slotHeld {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- a.s.Wait(wctx, SlotName(a.req.Name, k), h)
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
// name, shown as the lease name with its slot. It passes on the optional
// capabilities of the store's lease that leaderrun uses.
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

// StoreLease returns the store's own lease of the slot.
func (l *slotLease) StoreLease() Lease { return l.Lease }

// ReleaseHeld passes Holding on; a store lease without it releases at
// once when hold is not positive, and refuses a hold.
func (l *slotLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	if h, ok := l.Lease.(Holding); ok {
		return h.ReleaseHeld(ctx, hold)
	}
	if hold <= 0 {
		return l.Release(ctx)
	}
	return fmt.Errorf("this store cannot hold a slot after its run")
}

// Lost passes on the store lease's loss channel (nil: it has none, and a
// nil channel never closes).
func (l *slotLease) Lost() <-chan struct{} {
	if w, ok := l.Lease.(interface{ Lost() <-chan struct{} }); ok {
		return w.Lost()
	}
	return nil
}

// LockFile passes on the lock descriptor of a file store lease (nil: none).
func (l *slotLease) LockFile() *os.File {
	if lf, ok := l.Lease.(interface{ LockFile() *os.File }); ok {
		return lf.LockFile()
	}
	return nil
}

// SlotStatus returns the holder of each held slot of lease name, in slot
// order, with Slot and Slots set, and the number of slots its holders were
// started with (1 for a lease taken without slots; 0 when nothing is
// held). slots, when above 1, is how many slots to read; 0 means as many
// as the holders say, and, while none is found, up to the first two free
// slots in a row (holders take the lowest free slot, so a lease whose
// slots 0 and 1 are free is most likely free).
func SlotStatus(ctx context.Context, s Store, name string, slots int) ([]Holder, int, error) {
	var out []Holder
	n, free := slots, 0
	for k := 0; n == 0 && free < 2 || k < n; k++ {
		h, err := s.Status(ctx, SlotName(name, k))
		if err != nil {
			return nil, 0, err
		}
		if h == nil {
			free++
			continue
		}
		free = 0
		sh := SlotHolder(*h)
		sh.Name = name
		sh.Slot = k
		if n == 0 {
			n = max(sh.Slots, 1)
		}
		out = append(out, sh)
		if k == 0 && sh.Slots == 0 && h.Label != "" {
			break // a lease taken without slots
		}
	}
	if len(out) == 0 {
		n = 0
	}
	return out, n, nil
}
