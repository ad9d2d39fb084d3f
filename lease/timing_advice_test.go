package lease

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every suggestion a refusal makes is accepted when followed: for each
// refused combination on a grid of values, over the limits of every kind of
// store, each suggested change applied alone (the others as given) resolves.
// Advice that was itself refused sent users in circles ("use --renew-every
// ≤ 9ms" → "below the floor of 10ms"; "--ttl 99ms" → "100ms to 0s").
func TestTimingAdviceIsAccepted(t *testing.T) {
	stores := map[string]Limits{
		"file":       {Expires: true, Epsilon: 5 * time.Millisecond}, // as cmd validates it
		"redis":      {Expires: true, Epsilon: 5 * time.Millisecond, MinTTL: 100 * time.Millisecond, TTLUnit: time.Millisecond},
		"azure":      {Expires: true, Epsilon: time.Second, MinTTL: 15 * time.Second, MaxTTL: 60 * time.Second, TTLUnit: time.Second},
		"etcd":       {Expires: true, Epsilon: 5 * time.Millisecond, MinTTL: 2 * time.Second, TTLUnit: time.Second},
		"kubernetes": {Expires: true, Epsilon: 10 * time.Millisecond, MinTTL: time.Second, TTLUnit: time.Second},
	}
	ms := time.Millisecond
	// What a CPU limit adds to the kill bound (none; 5 % and 1 % of a core).
	stalls := []time.Duration{0, time.Second, 5 * time.Second}
	ttls := []time.Duration{0, 50 * ms, 99 * ms, 100 * ms, 328 * ms, 500 * ms, 943 * ms, 2 * time.Second, 2500 * ms, 5 * time.Second, 15 * time.Second, 15500 * ms, 16 * time.Second, 61 * time.Second, 25 * time.Hour}
	renews := []time.Duration{0, 9 * ms, 10 * ms, 100 * ms, 500 * ms, 3 * time.Second, 20 * time.Second}
	graces := []time.Duration{-1, 0, 100 * ms, time.Second, 4 * time.Second, 30 * time.Second}
	calls := []time.Duration{0, 4 * ms, 5 * ms, 50 * ms, 2 * time.Second}
	fixRE := regexp.MustCompile(`(--[a-z-]+) (≤ |≥ |)([0-9.]+[a-zµ]+[0-9a-z.]*)`)
	refused, advised, checked := 0, 0, 0
	for store, lim := range stores {
		for _, ttl := range ttls {
			for _, r := range renews {
				for _, g := range graces {
					for _, c := range calls {
						for _, stall := range stalls {
							in := Timing{TTL: ttl, RenewEvery: r, CallTimeout: c, Stall: stall, StallCause: "a CPU limit"}
							in.Explicit.RenewEvery, in.Explicit.CallTimeout = r != 0, c != 0
							if g >= 0 {
								in.Grace, in.Explicit.Grace = g, true
							}
							_, err := in.Resolve(lim)
							if err == nil {
								continue
							}
							refused++
							if msg := err.Error(); badDurationRE.MatchString(msg) && !strings.Contains(msg, "must not be negative") {
								t.Errorf("%s: %+v: a negative or long-form duration in %q", store, in, msg)
							}
							_, advice, _ := strings.Cut(err.Error(), "; use ")
							fixes := fixRE.FindAllStringSubmatch(advice, -1)
							if len(fixes) > 0 {
								advised++
							}
							for _, m := range fixes {
								v, perr := time.ParseDuration(m[3])
								if perr != nil {
									t.Fatalf("%s: advice %q: %v", store, m[0], perr)
								}
								fixed := in
								switch m[1] {
								case "--ttl":
									fixed.TTL = v
								case "--renew-every":
									fixed.RenewEvery, fixed.Explicit.RenewEvery = v, true
								case "--grace":
									fixed.Grace, fixed.Explicit.Grace = v, true
								case "--call-timeout":
									fixed.CallTimeout, fixed.Explicit.CallTimeout = v, true
								default:
									t.Fatalf("%s: advice names %s", store, m[1])
								}
								checked++
								if _, err2 := fixed.Resolve(lim); err2 != nil {
									t.Errorf("%s: %+v refused: %v\n  followed %q: still refused: %v", store, in, err, m[0], err2)
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d refusals, %d with advice, %d suggestions followed, all accepted", refused, advised, checked)
	if checked == 0 || advised < refused/2 {
		t.Fatalf("%d refusals but only %d with advice: the advice went missing", refused, advised)
	}
}

// badDurationRE finds what a message must not show: a negative duration
// ("stopped -165ms after") or Go's long form ("1m0s", "800h0m0s").
var badDurationRE = regexp.MustCompile(`(^|[ (])-[0-9]|[0-9]h0m|[0-9]m0s`)

// A TTL between two of the store's whole units (etcd and Azure count whole
// seconds) is refused with the whole values either side, and durations read
// as people write them.
func TestTimingAdviceWholeUnits(t *testing.T) {
	etcd := Limits{Expires: true, Epsilon: 5 * time.Millisecond, MinTTL: 2 * time.Second, TTLUnit: time.Second}
	azure := Limits{Expires: true, Epsilon: time.Second, MinTTL: 15 * time.Second, MaxTTL: 60 * time.Second, TTLUnit: time.Second}
	for _, tc := range []struct {
		lim  Limits
		ttl  time.Duration
		want string
	}{
		{etcd, 2500 * time.Millisecond, "--ttl 2.5s must be a whole number of seconds for this store; use --ttl 2s or --ttl 3s"},
		{azure, 15500 * time.Millisecond, "use --ttl 15s or --ttl 16s"},
		{azure, 59500 * time.Millisecond, "use --ttl 59s or --ttl 1m"},
		{azure, 10 * time.Second, "(15s to 1m); use --ttl ≥ 15s"},
	} {
		_, err := Timing{TTL: tc.ttl}.Resolve(tc.lim)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--ttl %v: %v; want %q", tc.ttl, err, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{800 * time.Hour: "800h", time.Minute: "1m", 90 * time.Second: "1m30s", 2500 * time.Millisecond: "2.5s", 200 * time.Millisecond: "200ms", 0: "0s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q; want %q", d, got, want)
		}
	}
}
