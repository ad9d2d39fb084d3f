package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoRunway is returned by Keep when the lease, even after an immediate
// renewal, is too close to its deadline to start the child safely (docs/design.md, safety rule 7).
var ErrNoRunway = errors.New("not enough validity left to start the child")

// KeeperConfig configures Keep. Timing must come from Timing.Resolve.
type KeeperConfig struct {
	// Timing holds TTL, RenewEvery, Grace, CallTimeout, KillBound and Rho.
	Timing Timing
	// Limits are the store's (Store.Limits).
	Limits Limits
	// Clock is the deadline clock; nil means BootClock.
	Clock Clock
	// Log receives renewal events; nil discards them.
	Log *slog.Logger
	// OnExtend, if not nil, is called with the new E (a Clock reading) each
	// time a confirmed renewal moves it; leaderrun hands it to the guard
	// process. It runs on the renew loop and must not block.
	OnExtend func(validUntil time.Duration)
	// OnRenew, if not nil, is called after each renewal the renew loop
	// made, with how long its answer took and its error (nil: renewed);
	// --listen's metrics count them. It runs on the renew loop and must
	// not block.
	OnRenew func(took time.Duration, err error)
}

// Keeper renews a lease in the background and cancels its context the moment
// leadership can no longer be vouched for: when the store says the lease is
// lost, or when the local deadline E−K−G arrives without a confirmed renewal
// (docs/design.md, safety rules). The zero value is not usable; call Keep.
type Keeper struct {
	l      Lease
	cfg    KeeperConfig
	clock  Clock
	log    *slog.Logger
	ctx    context.Context // leadership: cancelled at the stop point or on loss
	cancel context.CancelCauseFunc
	life   context.Context // the keeper's goroutines: cancelled by Stop
	end    context.CancelFunc
	killC  chan struct{} // closed at E−K
	// validUntil is E as a Clock reading; math.MaxInt64 when the lease does not expire.
	validUntil atomic.Int64
	// lastSent is the Clock reading at which the last confirmed request was sent.
	lastSent atomic.Int64
	// failed counts renewals that got no answer or an error other than lost.
	failed atomic.Int64
	wg     sync.WaitGroup
}

// Keep starts keeping l, acquired by a request sent at Clock reading sentAt.
// It first makes sure there is runway to start a child: if E − now is not
// more than K + G + RenewEvery it renews at once, and returns ErrNoRunway
// (or the renewal's error) if that does not fix it. The returned Keeper's
// Context is cancelled with a cause wrapping ErrLost when leadership is lost,
// and with ctx's cause when ctx is. Stop must be called to end it.
func Keep(ctx context.Context, l Lease, sentAt time.Duration, cfg KeeperConfig) (*Keeper, error) {
	k := &Keeper{l: l, cfg: cfg, clock: cfg.Clock, log: cfg.Log, killC: make(chan struct{})}
	if k.clock == nil {
		k.clock = BootClock{}
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.validUntil.Store(math.MaxInt64)
	k.lastSent.Store(int64(sentAt))
	if cfg.Limits.Expires {
		k.validUntil.Store(int64(sentAt + cfg.Timing.Validity(cfg.Limits)))
		need := cfg.Timing.StopLead() + cfg.Timing.RenewEvery
		if k.runway() <= need {
			ts := k.clock.Now()
			cctx, cancel := k.callContext(ctx, ts)
			err := l.Renew(cctx)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("renewing a lease that was granted too late: %w", err)
			}
			k.extend(ts)
			k.lastSent.Store(int64(ts))
			if k.runway() <= need {
				return nil, fmt.Errorf("%w: %v left, need more than %v; is the store slow to answer?", ErrNoRunway, k.runway(), need)
			}
		}
	}
	k.ctx, k.cancel = context.WithCancelCause(ctx)
	k.life, k.end = context.WithCancel(context.WithoutCancel(ctx))
	// From the last renewal sent: after a runway renewal, not the grant's
	// (which would renew again at once).
	next := time.Duration(k.lastSent.Load()) + cfg.Timing.RenewEvery
	k.wg.Add(1)
	go k.renewLoop(next)
	if w, ok := As[interface{ Lost() <-chan struct{} }](l); ok {
		k.wg.Add(1)
		go k.watchLost(w.Lost())
	}
	if cfg.Limits.Expires {
		k.wg.Add(1)
		go k.watchdog()
	}
	return k, nil
}

// Context is cancelled when leadership ends; context.Cause tells why.
func (k *Keeper) Context() context.Context { return k.ctx }

// Done is closed when leadership ends.
func (k *Keeper) Done() <-chan struct{} { return k.ctx.Done() }

// KillC is closed at E−K: the moment the child's process group must be
// SIGKILLed so that it is gone by E, the end of the lease's certain validity.
// It is read on the same suspend-aware clock as every other deadline. It is
// never closed for a lease that does not expire, or after Stop.
func (k *Keeper) KillC() <-chan struct{} { return k.killC }

// ValidUntil returns E, the Clock reading until which the lease is certainly
// ours, and false when the lease does not expire.
func (k *Keeper) ValidUntil() (time.Duration, bool) {
	v := k.validUntil.Load()
	return time.Duration(v), v != math.MaxInt64
}

// RenewalsFailed is how many renewals failed without losing the lease (no
// answer in time, a store error) and were retried; a renewal that found
// the lease lost is not counted.
func (k *Keeper) RenewalsFailed() int { return int(k.failed.Load()) }

// Stop stops renewing and waits for the keeper's goroutines. It does not
// release the lease. Stop is idempotent.
func (k *Keeper) Stop() {
	k.cancel(errStopped)
	k.end()
	k.wg.Wait()
}

var errStopped = errors.New("keeper stopped")

// FirstRetry is how long the keeper waits before retrying a failed renewal
// (doubling after each further failure); Timing.Resolve counts it.
const FirstRetry = 50 * time.Millisecond

func (k *Keeper) runway() time.Duration {
	return time.Duration(k.validUntil.Load()) - k.clock.Now()
}

// extend moves E after a renewal sent at ts succeeded. E never moves back.
func (k *Keeper) extend(ts time.Duration) {
	if !k.cfg.Limits.Expires {
		return
	}
	e := int64(ts + k.cfg.Timing.Validity(k.cfg.Limits))
	for {
		old := k.validUntil.Load()
		if e <= old {
			return
		}
		if k.validUntil.CompareAndSwap(old, e) {
			if k.cfg.OnExtend != nil {
				k.cfg.OnExtend(time.Duration(e))
			}
			return
		}
	}
}

// PastStopPoint reports whether the stop point E−K−G has passed on the
// keeper's clock without a renewal moving it: from then on, leadership can
// no longer be vouched for, whatever the child did meanwhile. Always false
// for a lease that does not expire.
func (k *Keeper) PastStopPoint() bool {
	if !k.cfg.Limits.Expires {
		return false
	}
	return k.clock.Now() >= k.stopAt()
}

// stopAt is the Clock reading at which the child must get its stop signal.
func (k *Keeper) stopAt() time.Duration {
	return time.Duration(k.validUntil.Load()) - k.cfg.Timing.StopLead()
}

// callContext bounds one store call sent at ts: it ends after CallTimeout or
// at the stop point, whichever is first (docs/design.md, safety rule 4).
func (k *Keeper) callContext(parent context.Context, ts time.Duration) (context.Context, context.CancelFunc) {
	d := k.cfg.Timing.CallTimeout
	if k.cfg.Limits.Expires {
		d = min(d, k.stopAt()-ts)
	}
	return context.WithTimeout(parent, d)
}

// watchdog is the independent timer of docs/design.md, safety rule 3: it cancels the context at
// E−K−G and closes KillC at E−K, no matter what the renew loop is doing (a
// call may be hung, or the store may have said the lease is lost).
func (k *Keeper) watchdog() {
	defer k.wg.Done()
	for {
		at := k.stopAt()
		if k.clock.Now() >= at {
			break
		}
		if err := k.clock.SleepUntil(k.life, at); err != nil {
			return
		}
		// E may have moved while we slept; loop and re-read it.
	}
	ts := k.lastSent.Load()
	k.cancel(NewError(fmt.Sprintf("no renewal confirmed in time: the last confirmed one was sent %v ago, with ttl %v",
		(k.clock.Now()-time.Duration(ts)).Round(time.Millisecond), k.cfg.Timing.TTL), ErrLost))
	// E is final now: the renew loop no longer extends it.
	if err := k.clock.SleepUntil(k.life, time.Duration(k.validUntil.Load())-k.cfg.Timing.KillBound); err != nil {
		return
	}
	close(k.killC)
}

// renewLoop renews every RenewEvery, retries quickly on transient errors and
// cancels on a lost answer.
func (k *Keeper) renewLoop(next time.Duration) {
	defer k.wg.Done()
	t := k.cfg.Timing
	backoff := time.Duration(0)
	for {
		if err := k.clock.SleepUntil(k.ctx, next); err != nil {
			return
		}
		// A connection to set up again (it broke) gets until the stop
		// point, not the call timeout: set-up comes before the send time
		// read below, so it takes nothing from the lease's validity.
		cerr := k.connect(k.ctx)
		ts, sentWall := k.clock.Now(), time.Now()
		if k.cfg.Limits.Expires && ts >= k.stopAt() {
			return // the watchdog has fired or is about to
		}
		err := cerr
		if err == nil {
			cctx, cancel := k.callContext(k.ctx, ts)
			err = k.l.Renew(cctx)
			cancel()
		}
		if k.ctx.Err() != nil {
			return
		}
		if k.cfg.OnRenew != nil && cerr == nil {
			k.cfg.OnRenew(k.clock.Now()-ts, err)
		}
		switch {
		case err == nil:
			if k.cfg.Limits.Expires && k.clock.Now() >= k.stopAt() {
				// A late yes counts as a failure: stopping has begun.
				return
			}
			k.extend(ts)
			k.lastSent.Store(int64(ts))
			backoff = 0
			next = ts + t.RenewEvery
			// "sent" is wall time, for people and tests reading the log; no
			// decision uses it.
			k.log.Debug("lease renewed", "event", "renewed", "sent", sentWall.Format(time.RFC3339Nano),
				"valid_for", (time.Duration(k.validUntil.Load()) - k.clock.Now()).Round(time.Millisecond))
		case errors.Is(err, ErrLost) || errors.Is(err, ErrNotHeld):
			k.cancel(fmt.Errorf("renew: %w", asLost(err)))
			return
		default:
			// Unknown outcome: E stays put; retry soon (docs/design.md, safety rule 5).
			k.failed.Add(1)
			backoff = min(max(2*backoff, FirstRetry), t.RenewEvery/4, time.Second)
			next = k.clock.Now() + backoff
			k.log.Warn("lease renewal failed; retrying", "err", err, "retry_in", backoff,
				"stop_in", max(k.stopAt()-k.clock.Now(), 0).Round(time.Millisecond))
		}
	}
}

// watchLost ends leadership the moment a lease that can tell (the file
// store watches its lock file) reports itself lost, instead of at the next
// renewal. Renew then says why.
func (k *Keeper) watchLost(lost <-chan struct{}) {
	defer k.wg.Done()
	select {
	case <-lost:
	case <-k.ctx.Done():
		return
	}
	err := k.l.Renew(k.life)
	if err == nil {
		err = errors.New("the store reported the lease lost")
	}
	k.cancel(asLost(err))
}

// asLost makes sure err is classified as ErrLost, keeping its text.
func asLost(err error) error {
	if errors.Is(err, ErrLost) {
		return err
	}
	return NewError(err.Error(), ErrLost, err)
}
