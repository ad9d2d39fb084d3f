package lease

import (
	"fmt"
	"time"
)

// Default timing constants (docs/design.md: command line, safety rules).
const (
	// DefaultTTL is the lease duration when --ttl is not given.
	DefaultTTL = 15 * time.Second
	// DefaultGrace is the stop-signal → SIGKILL delay when --grace is not given;
	// it is shrunk automatically when a short TTL cannot fit it.
	DefaultGrace = 3 * time.Second
	// DefaultKillBound is K: the time SIGKILL needs to take a process group down.
	DefaultKillBound = 250 * time.Millisecond
	// DefaultRho is ρ: the bound on how much faster our clock may run than the store's.
	DefaultRho = 0.01
	// MinRenewEvery is the floor of --renew-every. Safety comes from the TTL
	// (which must exceed the kill bound and grace anyway, so at least ~330ms):
	// renewing more often than every 10ms only loads the store (a hundred
	// commands a second per holder) and the CPU without moving a deadline.
	MinRenewEvery = 10 * time.Millisecond
	// MinCallTimeout is the floor of --call-timeout. Under 5ms a call times
	// out on scheduling delay and GC pauses alone, even against a store on
	// the same host, and every renewal would fail spuriously.
	MinCallTimeout = 5 * time.Millisecond
	// MaxTTL bounds --ttl: the TTL is how long a crashed holder blocks the
	// others, and renewals keep a long job's lease alive anyway.
	MaxTTL = 24 * time.Hour
)

// Timing holds the timing knobs of one run. Fields a user did not set are
// zero; Resolve fills them from TTL and the store's Limits.
type Timing struct {
	// TTL is L, the lease duration asked of the store.
	TTL time.Duration
	// RenewEvery is how often the lease is renewed; default TTL/3.
	RenewEvery time.Duration
	// Grace is G, the delay between the stop signal and SIGKILL; default 3s,
	// shrunk to fit a short TTL unless given explicitly.
	Grace time.Duration
	// CallTimeout bounds one store call; default RenewEvery/2.
	CallTimeout time.Duration
	// KillBound is K; default 250ms.
	KillBound time.Duration
	// Rho is ρ; default 0.01.
	Rho float64
	// Explicit records which of RenewEvery, Grace and CallTimeout the user
	// gave: only those are refused when unsafe, the others adapt.
	Explicit struct{ RenewEvery, Grace, CallTimeout bool }
}

// Validity returns how long after sending a successful acquire or renew the
// lease is certainly still ours: L·(1−ρ) − ε (docs/design.md, safety rule 1).
func (t Timing) Validity(lim Limits) time.Duration {
	return time.Duration(float64(t.TTL)*(1-t.Rho)) - lim.Epsilon
}

// StopLead is how long before the local validity ends the stop signal goes
// out: K + G. SIGKILL follows G later, K before the end.
func (t Timing) StopLead() time.Duration { return t.KillBound + t.Grace }

// Resolve fills defaults and validates the result for a store with limits
// lim. It returns an error wrapping ErrUnsafeTiming (or ErrConfig for values
// the store cannot take) that says what would be safe.
func (t Timing) Resolve(lim Limits) (Timing, error) {
	if t.TTL == 0 {
		t.TTL = DefaultTTL
	}
	if t.Rho == 0 {
		t.Rho = DefaultRho
	}
	if t.KillBound == 0 {
		t.KillBound = DefaultKillBound
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--ttl", t.TTL}, {"--renew-every", t.RenewEvery}, {"--grace", t.Grace}, {"--call-timeout", t.CallTimeout}} {
		if d.v < 0 {
			return t, fmt.Errorf("%w: %s %v: durations must not be negative", ErrUnsafeTiming, d.flag, d.v)
		}
	}
	if t.TTL > MaxTTL {
		return t, fmt.Errorf("%w: --ttl %v is longer than %v; renewals keep a long job's lease alive, the TTL only bounds how long a crashed holder blocks the others", ErrUnsafeTiming, t.TTL, MaxTTL)
	}
	// Nothing longer than the longest TTL makes sense, and bounding every
	// duration here keeps the arithmetic below from overflowing (found by
	// reasoning about FuzzTimingResolve: 2·call-timeout wrapped negative).
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--renew-every", t.RenewEvery}, {"--grace", t.Grace}, {"--call-timeout", t.CallTimeout}} {
		if d.v > MaxTTL {
			return t, fmt.Errorf("%w: %s %v is longer than %v, the longest --ttl", ErrUnsafeTiming, d.flag, d.v, MaxTTL)
		}
	}
	if lim.Expires {
		if err := t.checkStoreTTL(lim); err != nil {
			return t, err
		}
	}
	if !t.Explicit.RenewEvery {
		t.RenewEvery = t.TTL / 3
		if t.RenewEvery < MinRenewEvery {
			return t, fmt.Errorf("%w: --ttl %v is too short: renewals every ttl/3 would come more often than every %v; use --ttl ≥ %v",
				ErrUnsafeTiming, t.TTL, MinRenewEvery, 3*MinRenewEvery)
		}
	}
	if t.RenewEvery < MinRenewEvery {
		return t, fmt.Errorf("%w: --renew-every %v is below the floor of %v (renewing more often only loads the store; safety comes from --ttl); use --renew-every ≥ %v",
			ErrUnsafeTiming, t.RenewEvery, MinRenewEvery, MinRenewEvery)
	}
	if !t.Explicit.CallTimeout {
		t.CallTimeout = t.RenewEvery / 2
	}
	if t.CallTimeout < MinCallTimeout {
		return t, fmt.Errorf("%w: --call-timeout %v is below the floor of %v (shorter calls time out on scheduling delays alone); use --call-timeout ≥ %v",
			ErrUnsafeTiming, t.CallTimeout, MinCallTimeout, MinCallTimeout)
	}
	if !t.Explicit.Grace {
		t.Grace = DefaultGrace
	}
	if !lim.Expires {
		// The lease ends only with our process: nothing to fit the grace into.
		return t, nil
	}
	// docs/design.md, safety rule 6: the scheduled renewal plus one retry must fit before the
	// stop point: L(1−ρ) − ε − K − G ≥ renew-every + 2·call-timeout (+ the
	// keeper's FirstRetry delay between the two).
	room := t.Validity(lim) - t.KillBound - t.RenewEvery - 2*t.CallTimeout - FirstRetry
	if !t.Explicit.Grace && t.Grace > room {
		t.Grace = max(room, 0).Truncate(time.Millisecond)
	}
	if room-t.Grace >= 0 {
		return t, nil
	}
	return t, t.unsafe(lim)
}

func (t Timing) checkStoreTTL(lim Limits) error {
	if lim.MinTTL > 0 && t.TTL < lim.MinTTL || lim.MaxTTL > 0 && t.TTL > lim.MaxTTL {
		return fmt.Errorf("%w: --ttl %v is outside what this store accepts (%v to %v)", ErrConfig, t.TTL, lim.MinTTL, lim.MaxTTL)
	}
	if lim.TTLUnit > 0 && t.TTL%lim.TTLUnit != 0 {
		return fmt.Errorf("%w: --ttl %v must be a whole number of %v for this store", ErrConfig, t.TTL, lim.TTLUnit)
	}
	return nil
}

// unsafe explains why t does not fit and what would.
func (t Timing) unsafe(lim Limits) error {
	v := t.Validity(lim)
	stop := v - t.KillBound - t.Grace
	msg := fmt.Sprintf("with --ttl %v the child must be stopped %v after each renewal is sent "+
		"(ttl·%.2f − %v store margin − %v kill bound − --grace %v), which leaves no room for --renew-every %v plus one retry (2 × %v call timeout + 50ms)",
		t.TTL, stop.Round(time.Millisecond), 1-t.Rho, lim.Epsilon, t.KillBound, t.Grace, t.RenewEvery.Round(time.Millisecond), t.CallTimeout.Round(time.Millisecond))
	var fixes []string
	if maxR := (stop - FirstRetry - 2*t.CallTimeout); t.Explicit.CallTimeout && maxR > 0 {
		fixes = append(fixes, fmt.Sprintf("--renew-every ≤ %v", maxR.Truncate(time.Millisecond)))
	} else if !t.Explicit.CallTimeout && stop-FirstRetry > 0 {
		fixes = append(fixes, fmt.Sprintf("--renew-every ≤ %v", ((stop-FirstRetry)/2).Truncate(time.Millisecond)))
	}
	if maxG := v - t.KillBound - t.RenewEvery - 2*t.CallTimeout - FirstRetry; maxG >= 0 {
		fixes = append(fixes, fmt.Sprintf("--grace ≤ %v", maxG.Truncate(time.Millisecond)))
	}
	// The TTL that would fit the other values as given. Values the user did
	// not give scale with the TTL (renew-every = L/3, call timeout = R/2).
	coef, fixed := 1-t.Rho, float64(lim.Epsilon+t.KillBound+t.Grace+FirstRetry)
	switch {
	case !t.Explicit.RenewEvery && !t.Explicit.CallTimeout:
		coef -= 2.0 / 3
	case !t.Explicit.RenewEvery:
		coef -= 1.0 / 3
		fixed += float64(2 * t.CallTimeout)
	case !t.Explicit.CallTimeout:
		fixed += float64(2 * t.RenewEvery)
	default:
		fixed += float64(t.RenewEvery + 2*t.CallTimeout)
	}
	need := time.Duration(fixed/coef) + 100*time.Millisecond
	need = need.Truncate(100 * time.Millisecond)
	if lim.TTLUnit > 0 {
		need = (need + lim.TTLUnit - 1).Truncate(lim.TTLUnit)
	}
	if lim.MaxTTL == 0 || need <= lim.MaxTTL {
		fixes = append(fixes, fmt.Sprintf("--ttl ≥ %v", need))
	}
	if len(fixes) > 0 {
		msg += "; use " + joinOr(fixes)
	}
	return fmt.Errorf("%w: %s", ErrUnsafeTiming, msg)
}

func joinOr(s []string) string {
	out := ""
	for i, x := range s {
		switch {
		case i == 0:
		case i == len(s)-1:
			out += " or "
		default:
			out += ", "
		}
		out += x
	}
	return out
}
