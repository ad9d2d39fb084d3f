package lease

import (
	"errors"
	"math/big"
	"testing"
	"time"
)

// fuzzLimits are the Limits of the three stores (file, Redis, Azure), copied
// here because the store packages import this one.
var fuzzLimits = []Limits{
	{Expires: false},
	{Expires: true, Epsilon: 5 * time.Millisecond, MinTTL: 100 * time.Millisecond, TTLUnit: time.Millisecond},
	{Expires: true, Epsilon: time.Second, MinTTL: 15 * time.Second, MaxTTL: 60 * time.Second, TTLUnit: time.Second},
}

// FuzzTimingResolve checks Resolve on any combination of durations: it never
// panics, every error is classified, and an accepted Timing really satisfies
// the safety rule (computed here without integer overflow), keeps the values
// the user gave, and fits the store's TTL bounds.
func FuzzTimingResolve(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(0), uint8(0), uint8(1))
	f.Add(int64(5*time.Second), int64(0), int64(4*time.Second), int64(0), uint8(2), uint8(1))
	f.Add(int64(15*time.Second), int64(0), int64(0), int64(0), uint8(0), uint8(2))
	f.Add(int64(3*time.Second), int64(time.Microsecond), int64(0), int64(time.Millisecond), uint8(5), uint8(1))
	f.Add(int64(time.Hour), int64(time.Minute), int64(time.Second), int64(1<<62), uint8(7), uint8(1))
	f.Add(int64(-1), int64(0), int64(0), int64(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, ttl, renew, grace, call int64, explicit, store uint8) {
		lim := fuzzLimits[int(store)%len(fuzzLimits)]
		in := Timing{TTL: time.Duration(ttl)}
		in.Explicit.RenewEvery = explicit&1 != 0
		in.Explicit.Grace = explicit&2 != 0
		in.Explicit.CallTimeout = explicit&4 != 0
		if in.Explicit.RenewEvery {
			in.RenewEvery = time.Duration(renew)
		}
		if in.Explicit.Grace {
			in.Grace = time.Duration(grace)
		}
		if in.Explicit.CallTimeout {
			in.CallTimeout = time.Duration(call)
		}
		out, err := in.Resolve(lim)
		if err != nil {
			if !errors.Is(err, ErrUnsafeTiming) && !errors.Is(err, ErrConfig) {
				t.Fatalf("Resolve(%+v) error %v is neither ErrUnsafeTiming nor ErrConfig", in, err)
			}
			return
		}
		if out.TTL <= 0 || out.TTL > MaxTTL || out.RenewEvery <= 0 || out.CallTimeout <= 0 || out.Grace < 0 {
			t.Fatalf("Resolve(%+v) accepted %+v: a duration out of range", in, out)
		}
		if in.Explicit.RenewEvery && out.RenewEvery != in.RenewEvery ||
			in.Explicit.Grace && out.Grace != in.Grace ||
			in.Explicit.CallTimeout && out.CallTimeout != in.CallTimeout {
			t.Fatalf("Resolve(%+v) changed a value the user gave: %+v", in, out)
		}
		if !lim.Expires {
			return
		}
		if lim.MinTTL > 0 && out.TTL < lim.MinTTL || lim.MaxTTL > 0 && out.TTL > lim.MaxTTL ||
			lim.TTLUnit > 0 && out.TTL%lim.TTLUnit != 0 {
			t.Fatalf("Resolve(%+v) accepted TTL %v outside the store's limits %+v", in, out.TTL, lim)
		}
		// L(1−ρ) − ε − K − G ≥ renew-every + 2·call-timeout + FirstRetry, exactly.
		lhs := big.NewInt(int64(out.Validity(lim)))
		lhs.Sub(lhs, big.NewInt(int64(out.KillBound)))
		lhs.Sub(lhs, big.NewInt(int64(out.Grace)))
		rhs := big.NewInt(int64(out.CallTimeout))
		rhs.Mul(rhs, big.NewInt(2))
		rhs.Add(rhs, big.NewInt(int64(out.RenewEvery)))
		rhs.Add(rhs, big.NewInt(int64(FirstRetry)))
		if lhs.Cmp(rhs) < 0 {
			t.Fatalf("Resolve(%+v) accepted %+v, but validity−K−G = %v ns < renew-every + 2·call-timeout + FirstRetry = %v ns",
				in, out, lhs, rhs)
		}
	})
}

// FuzzValidateName checks ValidateName against the rule as documented:
// 1-200 bytes of letters, digits, '.', '_', '-', '/', and no empty, "." or
// ".." path element. An accepted name is also safe as one file name once
// '/' is mapped to '%' (the file store's rule).
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"backup", "deploy/production", "", ".", "..", "a/../b", "a//b", "/a", "a/", "a.b-c_d", "ä", "a b", "a\x00b", "...", "a/./b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		want := len(name) >= 1 && len(name) <= 200
		for _, c := range []byte(name) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
				want = false
			}
		}
		start := 0
		for i := 0; i <= len(name); i++ {
			if i == len(name) || name[i] == '/' {
				if p := name[start:i]; p == "" || p == "." || p == ".." {
					want = false
				}
				start = i + 1
			}
		}
		if (err == nil) != want {
			t.Fatalf("ValidateName(%q) = %v, want accepted=%v", name, err, want)
		}
		if err != nil && !errors.Is(err, ErrBadName) {
			t.Fatalf("ValidateName(%q) = %v, not ErrBadName", name, err)
		}
	})
}
