package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// WaitForever as AcquireOptions.Wait waits until the lease is ours or ctx ends.
const WaitForever time.Duration = -1

// AcquireOptions configures Acquire.
type AcquireOptions struct {
	// Wait is how long to wait for a held lease: 0 tries once, WaitForever
	// (any negative value) waits until ctx is done.
	Wait time.Duration
	// CallTimeout bounds each TryAcquire call; 0 means no bound beyond ctx.
	CallTimeout time.Duration
	// Clock is the deadline clock; nil means BootClock.
	Clock Clock
	// Log receives the store-unavailable retries, and the waiting events
	// when OnWait is nil; nil discards them.
	Log *slog.Logger
	// OnWait, if not nil, is called on Acquire's goroutine when Acquire
	// starts to wait for a held lease, each time the holder changes, every
	// RemindEvery while it waits, and for each transient store failure; it
	// must not block. Nil means lines on Log: info when the wait starts and
	// when the holder changes, warn for the first of a run of store failures
	// (debug for the others).
	OnWait func(WaitEvent)
	// RemindEvery is the interval of WaitReminder events; 0 means none.
	RemindEvery time.Duration
	// Priority ranks this instance among the standbys of a store that is a
	// CandidateRegistry: when the lease becomes free, the live candidates
	// try in takeover order (higher priority first, then the longest
	// waiting), so the best live standby wins and a dead or slow one delays
	// the next by a bounded time (see the package doc, "Standbys and
	// takeover order"). A holder is never pre-empted.
	Priority int
	// PriorityStep, when positive, replaces the store's δ
	// (CandidateTiming.Step): how long this candidate holds back for each
	// live candidate ranked above it when the lease becomes free. A larger
	// step keeps the takeover order when standbys may be slow to notice a
	// release (a loaded host, a slow network); a smaller one lets the next
	// in line take over sooner when those before it are dead. It never
	// affects safety.
	PriorityStep time.Duration
}

// WaitKind says what a WaitEvent reports.
type WaitKind int

const (
	// WaitStarted: the lease was found held and Acquire starts waiting.
	WaitStarted WaitKind = iota + 1
	// WaitHolderChanged: the lease is now held by another acquisition.
	WaitHolderChanged
	// WaitReminder: Acquire is still waiting (every RemindEvery).
	WaitReminder
	// WaitStoreUnavailable: an attempt failed with a transient store error
	// (Err); Acquire retries after RetryIn.
	WaitStoreUnavailable
)

// WaitEvent is what Acquire reports to AcquireOptions.OnWait.
type WaitEvent struct {
	// Kind says what happened.
	Kind WaitKind
	// By is the holder as the store last reported it.
	By Holder
	// Waited is how long Acquire has waited so far.
	Waited time.Duration
	// Err is the store's error (WaitStoreUnavailable only).
	Err error
	// RetryIn is the delay before the next attempt (WaitStoreUnavailable).
	RetryIn time.Duration
	// First is true for the first WaitStoreUnavailable of a run of failures.
	First bool
}

// Acquired is a lease just taken, with the Clock reading at which the request
// that won it was sent: the origin of its validity (docs/design.md, safety rule 1).
type Acquired struct {
	Lease  Lease
	SentAt time.Duration
	// Waited is how long Acquire waited (for a holder or for the store)
	// before the attempt that won; 0 when the first attempt won.
	Waited time.Duration
}

// Acquire takes the lease req.Name from s, waiting as o says. A missing
// req.ID is filled with NewID; the same ID is reused for every attempt of
// this call, so an attempt whose answer was lost cannot lock us out.
//
// It returns a *HeldError (errors.Is ErrHeld) when the wait ran out, ctx's
// error (with its cause) when ctx ended, and the store's error at once when
// it is not transient. Transient errors (ErrUnavailable) are retried with
// jittered backoff for as long as the wait allows.
func Acquire(ctx context.Context, s Store, req Request, o AcquireOptions) (*Acquired, error) {
	if err := ValidateName(req.Name); err != nil {
		return nil, err
	}
	if req.Slots < 0 || req.Slots > MaxSlots {
		return nil, NewError(fmt.Sprintf("%d slots: want 1 to %d", req.Slots, MaxSlots), ErrConfig)
	}
	a := newAcquisition(ctx, s, req, o)
	defer a.end()
	for {
		if err := a.connect(); err != nil {
			if err = a.setupFailed(err); err != nil {
				return nil, err
			}
			continue
		}
		sent := a.clock.Now()
		l, err := a.attempt()
		var held *HeldError
		switch {
		case err == nil:
			return a.won(l, sent), nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case errors.As(err, &held):
			err = a.heldBy(held)
		case errors.Is(err, ErrUnavailable):
			a.lostAnswer(sent)
			err = a.unavailable(err)
		}
		if err != nil {
			return nil, err
		}
	}
}

// acquisition is one Acquire call: its options, and what it learnt so far
// about the holder, the store's failures and its own place in the line.
type acquisition struct {
	ctx     context.Context
	waitCtx context.Context // ctx bounded by AcquireOptions.Wait
	cancel  context.CancelFunc
	s       Store
	req     Request
	o       AcquireOptions
	clock   Clock
	onWait  func(WaitEvent)

	// lastHolder identifies the holder last reported (label/token).
	lastHolder string
	// waited is true once an attempt found the lease held or the store down.
	waited      bool
	waitedSince time.Duration
	// nextReminder is when the next WaitReminder is due (clock reading).
	nextReminder time.Duration
	backoff      time.Duration
	// firstUnknown is when the earliest attempt whose outcome we never
	// learnt was sent: if it in fact succeeded, the store's TTL started
	// then, so validity must count from there. -1: none since the last
	// definite answer.
	firstUnknown time.Duration
	lastErr      error
	// lastHeld is the holder the last definite answer reported: a wait
	// that runs out while the store fails transiently (a timeout under
	// contention) ends as held, as that answer said, not as a store error.
	lastHeld *HeldError
	// reg is the store's candidate registry (nil: none); cand is this
	// call's registration as a standby, made when it starts to wait.
	reg  CandidateRegistry
	cand *candidacy
	// seen is the holder a candidate listing found after a Wait: the lease
	// is still held, so the next attempt is skipped and we wait again.
	seen *HeldError
	// With Request.Slots above 1 (slots.go): unknownSlot is the slot whose
	// attempt's answer was lost (-1: none), tried first next time; slotHeld
	// is each slot's answer when the last attempt found all of them held.
	unknownSlot int
	slotHeld    []*HeldError
	brokenSlots map[int]bool // slots refused as unusable, warned about once
}

func newAcquisition(ctx context.Context, s Store, req Request, o AcquireOptions) *acquisition {
	a := &acquisition{ctx: ctx, waitCtx: ctx, cancel: func() {}, s: s, req: req, o: o, clock: o.Clock, onWait: o.OnWait, firstUnknown: -1, unknownSlot: -1}
	if a.clock == nil {
		a.clock = BootClock{}
	}
	if a.o.Log == nil {
		a.o.Log = slog.New(slog.DiscardHandler)
	}
	if a.req.ID == "" {
		a.req.ID = NewID()
	}
	if o.Wait >= 0 {
		a.waitCtx, a.cancel = context.WithTimeout(ctx, o.Wait)
	}
	if a.onWait == nil {
		a.onWait = a.logWait
	}
	a.waitedSince = a.clock.Now()
	a.reg = s
	return a
}

// logWait is the default OnWait: lines on the Log.
func (a *acquisition) logWait(ev WaitEvent) {
	switch ev.Kind {
	case WaitStarted, WaitHolderChanged:
		a.o.Log.Info((&HeldError{By: ev.By}).Error()+"; waiting", "lease", a.req.Name)
	case WaitStoreUnavailable:
		level := slog.LevelDebug
		if ev.First {
			level = slog.LevelWarn
		}
		a.o.Log.Log(a.ctx, level, "store unavailable; retrying until it answers", "lease", a.req.Name, "err", ev.Err, "retry_in", ev.RetryIn.Round(time.Millisecond))
	}
}

// end leaves the standbys (on a context of its own: a cancelled Acquire
// must not leave a registration behind) and releases the wait's timer.
func (a *acquisition) end() {
	if a.cand != nil {
		a.cand.leave(a.ctx)
	}
	a.cancel()
}

// attempt makes one TryAcquire, bounded by the call timeout, unless a
// listing has just seen the lease held: then it reports that holder. With
// slots it tries them (attemptSlots). A holder that was started with slots
// refuses a contender without them (ErrSlotsMismatch).
func (a *acquisition) attempt() (Lease, error) {
	if a.seen != nil {
		held := a.seen
		a.seen = nil
		return nil, held
	}
	if a.req.Slots > 1 {
		return a.attemptSlots()
	}
	l, err := a.try(a.req)
	if held := (*HeldError)(nil); errors.As(err, &held) {
		if err := mismatch(a.req.Name, held.By, 1); err != nil {
			return nil, err
		}
	}
	return l, err
}

// try makes one TryAcquire of req, bounded by the call timeout.
func (a *acquisition) try(req Request) (Lease, error) {
	cctx, cancel := a.ctx, context.CancelFunc(func() {})
	if a.o.CallTimeout > 0 {
		cctx, cancel = context.WithTimeout(a.ctx, a.o.CallTimeout)
	}
	defer cancel()
	return a.s.TryAcquire(cctx, req)
}

// won builds the result: validity counts from the earliest attempt whose
// answer was lost, if any (it may be the one the store granted).
func (a *acquisition) won(l Lease, sent time.Duration) *Acquired {
	if a.firstUnknown >= 0 {
		sent = min(sent, a.firstUnknown)
	}
	r := &Acquired{Lease: l, SentAt: sent}
	if a.waited {
		r.Waited = a.clock.Now() - a.waitedSince
	}
	return r
}

// gaveUp is the error of a wait that ran out (or ctx's, when it ended).
func (a *acquisition) gaveUp(held error) error {
	if a.ctx.Err() != nil {
		return context.Cause(a.ctx)
	}
	return fmt.Errorf("gave up after waiting %v: %w", (a.clock.Now() - a.waitedSince).Round(time.Millisecond), held)
}

// heldBy handles an attempt that found the lease held: it reports the
// holder, registers as a standby, waits for the store to say the lease may
// be free and then for this candidate's turn. It returns nil to try again,
// or the error that ends Acquire.
func (a *acquisition) heldBy(held *HeldError) error {
	a.firstUnknown, a.backoff = -1, 0
	a.lastHeld = held
	if a.o.Wait == 0 {
		return held
	}
	a.report(held)
	a.waited = true
	if a.cand == nil {
		a.cand = joinCandidates(a.ctx, a.reg, a.req.Name, Candidate{ID: a.req.ID, Label: a.req.Label, Priority: a.o.Priority, Since: time.Now()}, a.req.TTL, a.o.CallTimeout, a.o.PriorityStep, a.o.Log)
		// With slots, the holder a listing reports is slot 0's: it says
		// nothing of the others.
		a.cand.anySlot = a.req.Slots > 1
	}
	// A reminder bounds the store's wait: when it is due, Wait returns
	// early and the loop tries again, which also refreshes the holder it
	// reports.
	remindCtx, remindCancel := a.waitCtx, context.CancelFunc(func() {})
	if a.o.RemindEvery > 0 {
		remindCtx, remindCancel = context.WithTimeout(a.waitCtx, max(a.nextReminder-a.clock.Now(), 0))
	}
	err := a.wait(remindCtx, held)
	remindCancel()
	reminded := false
	if err != nil {
		if a.ctx.Err() != nil || a.waitCtx.Err() != nil {
			return a.gaveUp(held)
		}
		if remindCtx.Err() == nil {
			return err
		}
		reminded = true
	}
	if a.o.RemindEvery > 0 && a.clock.Now() >= a.nextReminder {
		a.nextReminder = a.clock.Now() + a.o.RemindEvery
		a.onWait(WaitEvent{Kind: WaitReminder, By: held.By, Waited: a.clock.Now() - a.waitedSince})
	}
	if a.cand == nil || reminded {
		// A reminder, not a sign that the lease is free: one attempt
		// refreshes the holder, without listing every standby.
		return nil
	}
	// The lease may be free: the front of the line goes first (see
	// herdFront). One listing tells both whether it still looks held (then
	// wait again, at no more cost than the attempt it replaces) and where we
	// stand.
	h, err := a.cand.takeTurn(a.waitCtx, a.clock)
	if err != nil {
		return a.gaveUp(held)
	}
	if h != nil {
		a.seen = &HeldError{By: *h}
	}
	return nil
}

// report tells OnWait when the wait starts and when the holder changes.
func (a *acquisition) report(held *HeldError) {
	who := held.By.Label + "/" + fmt.Sprint(held.By.Token)
	if who == a.lastHolder {
		return
	}
	kind := WaitHolderChanged
	if a.lastHolder == "" {
		kind = WaitStarted
		a.nextReminder = a.clock.Now() + a.o.RemindEvery
	}
	a.lastHolder = who
	a.onWait(WaitEvent{Kind: kind, By: held.By, Waited: a.clock.Now() - a.waitedSince})
}

// lostAnswer notes that the answer to the attempt sent at sent was lost:
// if the store granted it, the lease's TTL started then.
func (a *acquisition) lostAnswer(sent time.Duration) {
	if a.firstUnknown < 0 {
		a.firstUnknown = sent
	}
}

// setupFailed handles a connection set-up (connect) that failed: nothing
// was sent that the store could grant, so no answer was lost. A transient
// failure, a set-up cut short by SetupTimeout included, is waited out as
// unavailable says; the end of the wait or of ctx during the set-up ends
// Acquire as that would; any other error ends it at once.
func (a *acquisition) setupFailed(err error) error {
	switch {
	case a.ctx.Err() != nil:
		return context.Cause(a.ctx)
	case !errors.Is(err, ErrUnavailable):
		return err
	case a.o.Wait != 0 && a.waitCtx.Err() != nil:
		a.lastErr, a.waited = err, true
		return a.waitRanOut()
	}
	return a.unavailable(err)
}

// unavailable handles a transient store failure: it waits a jittered,
// growing backoff and returns nil to try again, or the error that ends
// Acquire (waitRanOut).
func (a *acquisition) unavailable(err error) error {
	a.lastErr = err
	a.waited = true
	if a.o.Wait == 0 {
		return err
	}
	a.backoff = min(max(2*a.backoff, 100*time.Millisecond), 5*time.Second)
	sleep := a.backoff/2 + rand.N(a.backoff/2+1)
	a.onWait(WaitEvent{Kind: WaitStoreUnavailable, Err: err, RetryIn: sleep, Waited: a.clock.Now() - a.waitedSince,
		First: a.backoff == 100*time.Millisecond}) // the first failure of a run of them
	if err := a.clock.SleepUntil(a.waitCtx, a.clock.Now()+sleep); err != nil {
		return a.waitRanOut()
	}
	return nil
}

// waitRanOut is the error of a wait that ended (or ctx's, when it ended)
// while the store failed transiently. When an earlier attempt had found
// the lease held, Acquire gave up on a held lease (the failures since were
// retries: under contention an attempt may time out, a connection may be
// slow to set up), so it ends as held; with no such answer, as the store's
// last error: it never answered an attempt for the whole wait.
func (a *acquisition) waitRanOut() error {
	if a.ctx.Err() != nil {
		return context.Cause(a.ctx)
	}
	if a.lastHeld != nil {
		return a.gaveUp(a.lastHeld)
	}
	return fmt.Errorf("%w (gave up after %v of retries)", a.lastErr, (a.clock.Now() - a.waitedSince).Round(time.Millisecond))
}
