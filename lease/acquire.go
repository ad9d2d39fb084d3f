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
	// Log receives waiting events; nil discards them.
	Log *slog.Logger
}

// Acquired is a lease just taken, with the Clock reading at which the request
// that won it was sent: the origin of its validity (DESIGN §3.1).
type Acquired struct {
	Lease  Lease
	SentAt time.Duration
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

	var (
		lastHolder string
		backoff    time.Duration
		// firstUnknown is when the earliest attempt whose outcome we never
		// learnt was sent: if it in fact succeeded, the store's TTL started
		// then, so validity must count from there. -1: none since the last
		// definite answer.
		firstUnknown time.Duration = -1
		waitedSince                = clock.Now()
		lastErr      error
	)
	for {
		sent := clock.Now()
		cctx, ccancel := ctx, context.CancelFunc(func() {})
		if o.CallTimeout > 0 {
			cctx, ccancel = context.WithTimeout(ctx, o.CallTimeout)
		}
		l, err := s.TryAcquire(cctx, req)
		ccancel()
		var held *HeldError
		switch {
		case err == nil:
			if firstUnknown >= 0 {
				sent = min(sent, firstUnknown)
			}
			return &Acquired{Lease: l, SentAt: sent}, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case errors.As(err, &held):
			firstUnknown = -1
			backoff = 0
			if o.Wait == 0 {
				return nil, err
			}
			if who := held.By.Holder + "/" + fmt.Sprint(held.By.Token); who != lastHolder {
				lastHolder = who
				log.Info(held.Error()+"; waiting", "lease", req.Name)
			}
			if err := s.Wait(waitCtx, req.Name, held); err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				if waitCtx.Err() != nil {
					return nil, fmt.Errorf("gave up after waiting %v: %w", (clock.Now() - waitedSince).Round(time.Millisecond), held)
				}
				return nil, err
			}
		case errors.Is(err, ErrUnavailable):
			lastErr = err
			if firstUnknown < 0 {
				firstUnknown = sent
			}
			if o.Wait == 0 {
				return nil, err
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			sleep := backoff/2 + rand.N(backoff/2+1)
			level := slog.LevelDebug
			if backoff == 100*time.Millisecond { // the first failure of a run of them
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "store unavailable; retrying until it answers", "lease", req.Name, "err", err, "retry_in", sleep.Round(time.Millisecond))
			if err := clock.SleepUntil(waitCtx, clock.Now()+sleep); err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return nil, fmt.Errorf("gave up after %v of store errors: %w", (clock.Now() - waitedSince).Round(time.Millisecond), lastErr)
			}
		default:
			return nil, err
		}
	}
}
