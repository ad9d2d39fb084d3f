package lease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func TestTimingResolve(t *testing.T) {
	redis := lease.Limits{Expires: true, Epsilon: 5 * time.Millisecond}
	azure := lease.Limits{Expires: true, Epsilon: time.Second, MinTTL: 15 * time.Second, MaxTTL: 60 * time.Second, TTLUnit: time.Second}
	file := lease.Limits{}
	type explicit = struct{ RenewEvery, Grace, CallTimeout bool }
	tests := []struct {
		name    string
		in      lease.Timing
		lim     lease.Limits
		wantErr error
		errHas  []string
		check   func(t *testing.T, got lease.Timing)
	}{
		{name: "defaults", in: lease.Timing{}, lim: redis, check: func(t *testing.T, got lease.Timing) {
			if got.TTL != 15*time.Second || got.RenewEvery != 5*time.Second || got.Grace != 3*time.Second || got.CallTimeout != 2500*time.Millisecond {
				t.Fatalf("defaults = %+v", got)
			}
		}},
		{name: "short ttl shrinks default grace", in: lease.Timing{TTL: 5 * time.Second}, lim: redis, check: func(t *testing.T, got lease.Timing) {
			if got.Grace <= 0 || got.Grace >= 3*time.Second {
				t.Fatalf("grace %v; want shrunk below 3s but positive", got.Grace)
			}
			// the shrunk grace satisfies the rule exactly
			if got.Validity(redis)-got.KillBound-got.Grace < got.RenewEvery+2*got.CallTimeout+lease.FirstRetry {
				t.Fatalf("resolved timing %+v violates the rule", got)
			}
		}},
		{name: "explicit grace too long refused", in: lease.Timing{TTL: 5 * time.Second, Grace: 3 * time.Second, Explicit: explicit{Grace: true}}, lim: redis,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--grace ≤", "--ttl ≥"}},
		{name: "explicit renew-every too slow refused", in: lease.Timing{TTL: 15 * time.Second, RenewEvery: 10 * time.Second, Grace: 10 * time.Second, Explicit: explicit{RenewEvery: true, Grace: true}}, lim: redis,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--renew-every"}},
		{name: "ttl too short for anything", in: lease.Timing{TTL: 300 * time.Millisecond}, lim: redis, wantErr: lease.ErrUnsafeTiming},
		// A CPU limit's stall adds to the default kill bound: the stop and
		// kill points come earlier, a default grace shrinks for it, and
		// values given that no longer fit are refused naming the limit.
		{name: "cpu limit grows the kill bound", in: lease.Timing{Stall: 400 * time.Millisecond, StallCause: "a CPU limit of 5% of a core"}, lim: redis, check: func(t *testing.T, got lease.Timing) {
			if got.KillBound != lease.DefaultKillBound+400*time.Millisecond || got.StopLead() != got.KillBound+got.Grace {
				t.Fatalf("kill bound %v, stop lead %v; want %v + 400ms", got.KillBound, got.StopLead(), lease.DefaultKillBound)
			}
		}},
		{name: "cpu limit shrinks the default grace", in: lease.Timing{TTL: 5 * time.Second, Stall: time.Second}, lim: redis, check: func(t *testing.T, got lease.Timing) {
			if got.Validity(redis)-got.KillBound-got.Grace < got.RenewEvery+2*got.CallTimeout+lease.FirstRetry || got.Grace <= 0 {
				t.Fatalf("resolved timing %+v violates the rule", got)
			}
		}},
		{name: "cpu limit refuses what no longer fits, naming it", in: lease.Timing{TTL: 2 * time.Second, RenewEvery: 500 * time.Millisecond, Grace: 300 * time.Millisecond,
			Stall: 400 * time.Millisecond, StallCause: "a CPU limit of 5% of a core (cpu.max 5000 100000 in /sys/fs/cgroup/x)", Explicit: explicit{RenewEvery: true, Grace: true}}, lim: redis,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"650ms kill bound (250ms + 400ms that a CPU limit of 5% of a core (cpu.max 5000 100000 in /sys/fs/cgroup/x) can hold", "--ttl ≥ "}},
		{name: "cpu limit fits a longer ttl", in: lease.Timing{TTL: 3 * time.Second, RenewEvery: 500 * time.Millisecond, Grace: 300 * time.Millisecond,
			Stall: 400 * time.Millisecond, Explicit: explicit{RenewEvery: true, Grace: true}}, lim: redis},
		{name: "huge stall refused, no overflow", in: lease.Timing{Stall: time.Duration(1<<63 - 1)}, lim: redis, wantErr: lease.ErrUnsafeTiming},
		{name: "azure 10s refused locally", in: lease.Timing{TTL: 10 * time.Second}, lim: azure, wantErr: lease.ErrConfig, errHas: []string{"15s to 1m"}},
		{name: "azure 61s refused", in: lease.Timing{TTL: 61 * time.Second}, lim: azure, wantErr: lease.ErrConfig},
		{name: "azure fractional refused", in: lease.Timing{TTL: 15500 * time.Millisecond}, lim: azure, wantErr: lease.ErrConfig, errHas: []string{"whole number"}},
		{name: "azure 15s ok with defaults", in: lease.Timing{TTL: 15 * time.Second}, lim: azure},
		{name: "negative refused", in: lease.Timing{Grace: -time.Second, Explicit: explicit{Grace: true}}, lim: redis, wantErr: lease.ErrUnsafeTiming},
		{name: "file store takes any positive timing", in: lease.Timing{TTL: time.Second, Grace: time.Minute, Explicit: explicit{Grace: true}}, lim: file},
		{name: "huge call-timeout refused, no overflow", in: lease.Timing{TTL: 3 * time.Second, CallTimeout: time.Duration(1<<63 - 1), Explicit: explicit{CallTimeout: true}}, lim: redis,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--call-timeout", "longer than 24h"}},
		{name: "huge grace refused", in: lease.Timing{Grace: 100 * 24 * time.Hour, Explicit: explicit{Grace: true}}, lim: file,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--grace"}},
		{name: "ttl over a day refused", in: lease.Timing{TTL: 25 * time.Hour}, lim: redis, wantErr: lease.ErrUnsafeTiming, errHas: []string{"24h"}},
		{name: "nanosecond ttl says ttl", in: lease.Timing{TTL: time.Nanosecond}, lim: redis, wantErr: lease.ErrUnsafeTiming, errHas: []string{"--ttl 1ns is too short"}},
		{name: "zero renew-every refused", in: lease.Timing{RenewEvery: 0, Explicit: explicit{RenewEvery: true}}, lim: file, wantErr: lease.ErrUnsafeTiming},
		// Floors: refused on every store, saying what fits.
		{name: "renew-every 1us refused", in: lease.Timing{RenewEvery: time.Microsecond, Explicit: explicit{RenewEvery: true}}, lim: redis,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--renew-every 1µs is below the floor of 10ms", "--renew-every ≥ 10ms"}},
		// Two values under their floors: no single change fits, so none is
		// suggested (each would be refused in turn); the floors are named.
		{name: "two floors refused", in: lease.Timing{RenewEvery: time.Microsecond, CallTimeout: time.Millisecond, Explicit: explicit{RenewEvery: true, CallTimeout: true}}, lim: redis,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--renew-every 1µs is below the floor of 10ms"}},
		{name: "renew-every under floor refused on file", in: lease.Timing{RenewEvery: 9 * time.Millisecond, Explicit: explicit{RenewEvery: true}}, lim: file,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--renew-every ≥ 10ms"}},
		{name: "call-timeout 1ms refused", in: lease.Timing{TTL: 2 * time.Second, RenewEvery: 100 * time.Millisecond, CallTimeout: time.Millisecond, Explicit: explicit{RenewEvery: true, CallTimeout: true}}, lim: redis,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--call-timeout 1ms is below the floor of 5ms", "--call-timeout ≥ 5ms"}},
		{name: "short ttl on file gives renewals under the floor", in: lease.Timing{TTL: 20 * time.Millisecond}, lim: file,
			wantErr: lease.ErrUnsafeTiming, errHas: []string{"--ttl 20ms is too short", "--ttl ≥ 30ms"}},
		{name: "the floors themselves are accepted", in: lease.Timing{TTL: 2 * time.Second, RenewEvery: lease.MinRenewEvery, CallTimeout: lease.MinCallTimeout, Explicit: explicit{RenewEvery: true, CallTimeout: true}}, lim: redis},
		{name: "renew-every at the floor gives a call timeout at its floor", in: lease.Timing{TTL: 2 * time.Second, RenewEvery: lease.MinRenewEvery, Explicit: explicit{RenewEvery: true}}, lim: redis,
			check: func(t *testing.T, got lease.Timing) {
				if got.CallTimeout < lease.MinCallTimeout {
					t.Fatalf("derived call timeout %v is under the floor %v", got.CallTimeout, lease.MinCallTimeout)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.Resolve(tc.lim)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Resolve = %v; want %v", err, tc.wantErr)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("message %q does not say %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("message spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// The suggestion in a refusal must itself be accepted.
func TestTimingSuggestionIsSafe(t *testing.T) {
	lim := lease.Limits{Expires: true, Epsilon: 5 * time.Millisecond}
	in := lease.Timing{TTL: 5 * time.Second, Grace: 3 * time.Second, Explicit: struct{ RenewEvery, Grace, CallTimeout bool }{Grace: true}}
	_, err := in.Resolve(lim)
	if err == nil {
		t.Fatal("want refusal")
	}
	msg := err.Error()
	i := strings.Index(msg, "--ttl ≥ ")
	if i < 0 {
		t.Fatalf("no --ttl suggestion in %q", msg)
	}
	d, perr := time.ParseDuration(strings.Fields(msg[i+len("--ttl ≥ "):])[0])
	if perr != nil {
		t.Fatal(perr)
	}
	in.TTL = d
	if _, err := in.Resolve(lim); err != nil {
		t.Fatalf("suggested --ttl %v is refused too: %v", d, err)
	}
}
