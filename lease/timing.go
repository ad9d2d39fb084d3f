package lease

import (
	"fmt"
	"strings"
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
	// Stall is how long a CPU limit on leaderrun's cgroup can hold the
	// child's death back after a deadline (runner.CPULimitStall): the
	// default KillBound is DefaultKillBound + Stall, so the stop and kill
	// points come that much earlier. Zero when no limit binds.
	Stall time.Duration
	// StallCause names the limit behind Stall, for the message that
	// refuses a timing it does not leave room for.
	StallCause string
	// Explicit records which of RenewEvery, Grace and CallTimeout the user
	// gave: only those are refused when unsafe, the others adapt.
	Explicit struct{ RenewEvery, Grace, CallTimeout bool }
	// Spell names a flag in the messages that refuse its value (nil:
	// DashFlag): a command line that read the value from a variable names
	// the variable.
	Spell FlagSpeller
}

// FlagSpeller names the flag called name ("ttl") in a message, with its
// value as the message shows it when shown is not "": "--ttl 0s", or, for
// a value read from the flag's variable, "LEADERRUN_TTL=0s (--ttl)".
type FlagSpeller func(name, shown string) string

// DashFlag is the FlagSpeller of a value given as a flag: "--ttl",
// "--ttl 0s".
func DashFlag(name, shown string) string {
	if shown == "" {
		return "--" + name
	}
	return "--" + name + " " + shown
}

// spell is t.Spell, or DashFlag.
func (t Timing) spell(name, shown string) string {
	if t.Spell == nil {
		return DashFlag(name, shown)
	}
	return t.Spell(name, shown)
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
//
// Every change it suggests ("use --renew-every ≤ 314ms or --ttl ≥ 1.2s") is
// found by trying it with the same checks: applied alone, it is accepted.
func (t Timing) Resolve(lim Limits) (Timing, error) {
	r, err := t.resolve(lim)
	if err != nil {
		return r, t.advise(lim, r, err)
	}
	return r, nil
}

// resolve is Resolve without the advice: it says what is wrong. Its steps:
// defaults, bounds, the derived durations (derive), then the grace that
// must fit the lease's validity (fitGrace).
func (t Timing) resolve(lim Limits) (Timing, error) {
	if t.TTL == 0 {
		t.TTL = DefaultTTL
	}
	if t.Rho == 0 {
		t.Rho = DefaultRho
	}
	if t.KillBound == 0 {
		t.KillBound = DefaultKillBound + min(max(t.Stall, 0), MaxTTL)
	}
	if err := t.checkBounds(); err != nil {
		return t, err
	}
	if lim.Expires {
		if err := t.checkStoreTTL(lim); err != nil {
			return t, err
		}
	}
	t, err := t.derive()
	if err != nil {
		return t, err
	}
	if !lim.Expires {
		// The lease ends only with our process: nothing to fit the grace into.
		return t, nil
	}
	return t.fitGrace(lim)
}

// checkBounds refuses negative durations and any longer than MaxTTL.
func (t Timing) checkBounds() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"ttl", t.TTL}, {"renew-every", t.RenewEvery}, {"grace", t.Grace}, {"call-timeout", t.CallTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s: durations must not be negative", ErrUnsafeTiming, t.spell(d.flag, FormatDuration(d.v)))
		}
	}
	if t.TTL > MaxTTL {
		return fmt.Errorf("%w: %s is longer than %s; renewals keep a long job's lease alive, the TTL only bounds how long a crashed holder blocks the others", ErrUnsafeTiming, t.spell("ttl", FormatDuration(t.TTL)), FormatDuration(MaxTTL))
	}
	// Nothing longer than the longest TTL makes sense, and bounding every
	// duration here keeps the arithmetic below from overflowing (found by
	// reasoning about FuzzTimingResolve: 2·call-timeout wrapped negative).
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"renew-every", t.RenewEvery}, {"grace", t.Grace}, {"call-timeout", t.CallTimeout}} {
		if d.v > MaxTTL {
			return fmt.Errorf("%w: %s is longer than %s, the longest --ttl", ErrUnsafeTiming, t.spell(d.flag, FormatDuration(d.v)), FormatDuration(MaxTTL))
		}
	}
	return nil
}

// derive fills in the renewal interval, call timeout and grace not given,
// and refuses those below their floors.
func (t Timing) derive() (Timing, error) {
	if !t.Explicit.RenewEvery {
		t.RenewEvery = t.TTL / 3
		if t.RenewEvery < MinRenewEvery {
			return t, fmt.Errorf("%w: %s is too short: renewals every ttl/3 would come more often than every %s",
				ErrUnsafeTiming, t.spell("ttl", FormatDuration(t.TTL)), FormatDuration(MinRenewEvery))
		}
	}
	if t.RenewEvery < MinRenewEvery {
		return t, fmt.Errorf("%w: %s is below the floor of %s (renewing more often only loads the store; safety comes from --ttl)",
			ErrUnsafeTiming, t.spell("renew-every", FormatDuration(t.RenewEvery)), FormatDuration(MinRenewEvery))
	}
	if !t.Explicit.CallTimeout {
		t.CallTimeout = t.RenewEvery / 2
	}
	if t.CallTimeout < MinCallTimeout {
		return t, fmt.Errorf("%w: %s is below the floor of %s (shorter calls time out on scheduling delays alone)",
			ErrUnsafeTiming, t.spell("call-timeout", FormatDuration(t.CallTimeout)), FormatDuration(MinCallTimeout))
	}
	if !t.Explicit.Grace {
		t.Grace = DefaultGrace
	}
	return t, nil
}

// fitGrace checks docs/design.md, safety rule 6: the scheduled renewal plus
// one retry must fit before the stop point: L(1−ρ) − ε − K − G ≥
// renew-every + 2·call-timeout (+ the keeper's FirstRetry delay between the
// two). A grace that was not given shrinks to fit.
func (t Timing) fitGrace(lim Limits) (Timing, error) {
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
		switch {
		case lim.MaxTTL == 0:
			return fmt.Errorf("%w: %s is shorter than this store accepts (at least %s)", ErrConfig, t.spell("ttl", FormatDuration(t.TTL)), FormatDuration(lim.MinTTL))
		case lim.MinTTL == 0:
			return fmt.Errorf("%w: %s is longer than this store accepts (at most %s)", ErrConfig, t.spell("ttl", FormatDuration(t.TTL)), FormatDuration(lim.MaxTTL))
		}
		return fmt.Errorf("%w: %s is outside what this store accepts (%s to %s)", ErrConfig, t.spell("ttl", FormatDuration(t.TTL)), FormatDuration(lim.MinTTL), FormatDuration(lim.MaxTTL))
	}
	if lim.TTLUnit > 0 && t.TTL%lim.TTLUnit != 0 {
		return fmt.Errorf("%w: %s must be a whole number of %s for this store", ErrConfig, t.spell("ttl", FormatDuration(t.TTL)), unitName(lim.TTLUnit))
	}
	return nil
}

// unsafe explains why t does not fit and what would.
func (t Timing) unsafe(lim Limits) error {
	v := t.Validity(lim)
	stop := v - t.KillBound - t.Grace
	kill := FormatDuration(t.KillBound) + " kill bound"
	if t.Stall > 0 && t.KillBound == DefaultKillBound+t.Stall {
		if t.StallCause == "" {
			t.StallCause = "the CPU limit"
		}
		kill += fmt.Sprintf(" (%s + %s that %s can hold the child's death back)", FormatDuration(DefaultKillBound), FormatDuration(t.Stall), t.StallCause)
	}
	parts := fmt.Sprintf("ttl·%.2f − %s store margin − %s − --grace %s", 1-t.Rho, FormatDuration(lim.Epsilon), kill, FormatDuration(t.Grace))
	retry := fmt.Sprintf("--renew-every %s plus one retry (2 × %s call timeout + %s)", FormatDuration(t.RenewEvery.Round(time.Millisecond)), FormatDuration(t.CallTimeout.Round(time.Millisecond)), FormatDuration(FirstRetry))
	var msg string
	if stop <= 0 {
		msg = fmt.Sprintf("with --ttl %s the child would have to be stopped before each renewal is even sent (%s leaves nothing), let alone room for %s", FormatDuration(t.TTL), parts, retry)
	} else {
		msg = fmt.Sprintf("with --ttl %s the child must be stopped %s after each renewal is sent (%s), which leaves no room for %s", FormatDuration(t.TTL), FormatDuration(stop.Round(time.Millisecond)), parts, retry)
	}
	return fmt.Errorf("%w: %s", ErrUnsafeTiming, msg)
}

// unitName names a store's TTL unit: "second" for 1s.
func unitName(d time.Duration) string {
	switch d {
	case time.Second:
		return "seconds"
	case time.Millisecond:
		return "milliseconds"
	}
	return FormatDuration(d)
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

// A knob is one flag advise may suggest changing, with the values it can
// take: from lo to hi in steps of step.
type knob struct {
	flag         string
	cur          time.Duration
	lo, hi, step time.Duration
	set          func(Timing, time.Duration) Timing
}

// advise appends to err the changes that, each applied alone, make t
// acceptable: for each flag, the nearest value the same checks accept. The
// accepted values of one flag, the others fixed, form one range (a longer
// --ttl, a shorter --renew-every, --grace or --call-timeout leave more room,
// down to the floors); its ends are found by bisection.
//
// r is t as far as resolve filled its defaults: a suggestion for a value
// the user left out starts from the default it got (--renew-every ≤ X when
// the default ttl/3 does not fit), and none is made for a default that was
// not reached.
func (t Timing) advise(lim Limits, r Timing, err error) error {
	knobs := t.knobs(lim, r)
	var fixes []string
	unset := map[string]bool{ // defaults resolve had not reached
		"--renew-every":  !t.Explicit.RenewEvery && r.RenewEvery == 0,
		"--grace":        !t.Explicit.Grace && r.Grace == 0,
		"--call-timeout": !t.Explicit.CallTimeout && r.CallTimeout == 0,
	}
	for _, k := range knobs {
		if unset[k.flag] {
			continue
		}
		a, b, ok := k.accepted(t, lim)
		switch {
		case !ok:
		case k.cur < a:
			fixes = append(fixes, k.flag+" ≥ "+FormatDuration(a))
		case k.cur > b:
			fixes = append(fixes, k.flag+" ≤ "+FormatDuration(b))
		case k.step > time.Millisecond && k.cur%k.step != 0:
			// Within the range but between two steps (etcd's --ttl 2.5s):
			// the whole steps either side that are accepted.
			for _, v := range []time.Duration{k.cur.Truncate(k.step), k.cur.Truncate(k.step) + k.step} {
				if v >= a && v <= b {
					fixes = append(fixes, k.flag+" "+FormatDuration(v))
				}
			}
		}
	}
	if len(fixes) == 0 {
		return err
	}
	return fmt.Errorf("%w; use %s", err, joinOr(fixes))
}

// knobs are the settings advise may suggest a value for, each at its
// current value (r's, as resolve filled it) and within its own bounds.
func (t Timing) knobs(lim Limits, r Timing) []knob {
	ttlStep := time.Millisecond
	if lim.TTLUnit > 0 {
		ttlStep = lim.TTLUnit
	}
	ttlHi := MaxTTL
	if lim.MaxTTL > 0 {
		ttlHi = min(ttlHi, lim.MaxTTL)
	}
	ttl := t.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	return []knob{
		{"--renew-every", r.RenewEvery, MinRenewEvery, MaxTTL, time.Millisecond, func(t Timing, v time.Duration) Timing {
			t.RenewEvery, t.Explicit.RenewEvery = v, true
			return t
		}},
		{"--grace", r.Grace, 0, MaxTTL, time.Millisecond, func(t Timing, v time.Duration) Timing {
			t.Grace, t.Explicit.Grace = v, true
			return t
		}},
		{"--call-timeout", r.CallTimeout, MinCallTimeout, MaxTTL, time.Millisecond, func(t Timing, v time.Duration) Timing {
			t.CallTimeout, t.Explicit.CallTimeout = v, true
			return t
		}},
		{"--ttl", ttl, max(lim.MinTTL, ttlStep), ttlHi, ttlStep, func(t Timing, v time.Duration) Timing {
			t.TTL = v
			return t
		}},
	}
}

// accepted returns the range [a, b] of k's values that t accepts with every
// other value as it is, in k's steps; ok is false when it found none.
func (k knob) accepted(t Timing, lim Limits) (a, b time.Duration, ok bool) {
	lo, hi := (k.lo+k.step-1)/k.step, k.hi/k.step // in steps
	good := func(n time.Duration) bool {
		_, err := k.set(t, n*k.step).resolve(lim)
		return err == nil
	}
	switch {
	case good(lo):
		a = lo
		l, h := lo, hi
		for l < h { // the last accepted step
			if m := l + (h-l+1)/2; good(m) {
				l = m
			} else {
				h = m - 1
			}
		}
		b = l
	case good(hi):
		l, h := lo, hi
		for l < h { // the first accepted step
			if m := l + (h-l)/2; good(m) {
				h = m
			} else {
				l = m + 1
			}
		}
		a, b = h, hi
	default:
		return 0, 0, false
	}
	return a * k.step, b * k.step, true
}

// FormatDuration formats d as people write it, without trailing zero units:
// "800h", not "800h0m0s"; "1m30s", "2.5s", "200ms".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
