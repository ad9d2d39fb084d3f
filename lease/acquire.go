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
	clock := o.Clock
	if clock == nil {
		clock = BootClock{}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if req.ID == "" {
		req.ID = NewID()
	}
	waitCtx, cancel := ctx, context.CancelFunc(func() {})
	if o.Wait >= 0 {
		waitCtx, cancel = context.WithTimeout(ctx, o.Wait)
	}
	defer cancel()

	onWait := o.OnWait
	if onWait == nil {
		onWait = func(ev WaitEvent) {
			switch ev.Kind {
			case WaitStarted, WaitHolderChanged:
				log.Info((&HeldError{By: ev.By}).Error()+"; waiting", "lease", req.Name)
			case WaitStoreUnavailable:
				level := slog.LevelDebug
				if ev.First {
					level = slog.LevelWarn
				}
				log.Log(ctx, level, "store unavailable; retrying until it answers", "lease", req.Name, "err", ev.Err, "retry_in", ev.RetryIn.Round(time.Millisecond))
			}
		}
	}
	var (
		lastHolder string
		waited     bool
		// nextReminder is when the next WaitReminder is due (clock reading).
		nextReminder time.Duration
		backoff      time.Duration
		// firstUnknown is when the earliest attempt whose outcome we never
		// learnt was sent: if it in fact succeeded, the store's TTL started
		// then, so validity must count from there. -1: none since the last
		// definite answer.
		firstUnknown time.Duration = -1
		waitedSince                = clock.Now()
		lastErr      error
		// cand is this call's registration as a standby, made when it
		// starts to wait on a store that keeps a candidate registry.
		cand *candidacy
		// seen is the holder a candidate listing found after a Wait: the
		// lease is still held, so the loop waits again without trying.
		seen *HeldError
	)
	reg, _ := s.(CandidateRegistry)
	defer func() {
		if cand != nil {
			cand.leave(ctx)
		}
	}()
	for {
		sent := clock.Now()
		var (
			l   Lease
			err error
		)
		if seen != nil {
			err, seen = seen, nil
		} else {
			cctx, ccancel := ctx, context.CancelFunc(func() {})
			if o.CallTimeout > 0 {
				cctx, ccancel = context.WithTimeout(ctx, o.CallTimeout)
			}
			l, err = s.TryAcquire(cctx, req)
			ccancel()
		}
		var held *HeldError
		switch {
		case err == nil:
			if firstUnknown >= 0 {
				sent = min(sent, firstUnknown)
			}
			a := &Acquired{Lease: l, SentAt: sent}
			if waited {
				a.Waited = clock.Now() - waitedSince
			}
			return a, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case errors.As(err, &held):
			firstUnknown = -1
			backoff = 0
			if o.Wait == 0 {
				return nil, err
			}
			if who := held.By.Holder + "/" + fmt.Sprint(held.By.Token); who != lastHolder {
				kind := WaitHolderChanged
				if lastHolder == "" {
					kind = WaitStarted
					nextReminder = clock.Now() + o.RemindEvery
				}
				lastHolder = who
				onWait(WaitEvent{Kind: kind, By: held.By, Waited: clock.Now() - waitedSince})
			}
			waited = true
			if cand == nil && reg != nil {
				cand = joinCandidates(ctx, reg, req.Name, Candidate{ID: req.ID, Holder: req.Holder, Priority: o.Priority, Since: time.Now()}, req.TTL, o.CallTimeout, log)
			}
			// A reminder bounds the store's wait: when it is due, Wait
			// returns early and the loop tries again, which also refreshes
			// the holder it reports.
			remindCtx, remindCancel := waitCtx, context.CancelFunc(func() {})
			if o.RemindEvery > 0 {
				remindCtx, remindCancel = context.WithTimeout(waitCtx, max(nextReminder-clock.Now(), 0))
			}
			err := s.Wait(remindCtx, req.Name, held)
			remindCancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				if waitCtx.Err() != nil {
					return nil, fmt.Errorf("gave up after waiting %v: %w", (clock.Now() - waitedSince).Round(time.Millisecond), held)
				}
				if remindCtx.Err() == nil {
					return nil, err
				}
			}
			if o.RemindEvery > 0 && clock.Now() >= nextReminder {
				nextReminder = clock.Now() + o.RemindEvery
				onWait(WaitEvent{Kind: WaitReminder, By: held.By, Waited: clock.Now() - waitedSince})
			}
			if cand == nil {
				continue
			}
			// The lease may be free: the front of the line goes first (see
			// herdFront). One listing tells both whether it still looks
			// held (then wait again, at no more cost than the attempt it
			// replaces) and where we stand.
			h, err := cand.takeTurn(waitCtx, clock)
			if err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return nil, fmt.Errorf("gave up after waiting %v: %w", (clock.Now() - waitedSince).Round(time.Millisecond), held)
			}
			if h != nil {
				seen = &HeldError{By: *h}
			}
		case errors.Is(err, ErrUnavailable):
			lastErr = err
			waited = true
			if firstUnknown < 0 {
				firstUnknown = sent
			}
			if o.Wait == 0 {
				return nil, err
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			sleep := backoff/2 + rand.N(backoff/2+1)
			onWait(WaitEvent{Kind: WaitStoreUnavailable, Err: err, RetryIn: sleep, Waited: clock.Now() - waitedSince,
				First: backoff == 100*time.Millisecond}) // the first failure of a run of them
			if err := clock.SleepUntil(waitCtx, clock.Now()+sleep); err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return nil, fmt.Errorf("%w (gave up after %v of retries)", lastErr, (clock.Now() - waitedSince).Round(time.Millisecond))
			}
		default:
			return nil, err
		}
	}
}
