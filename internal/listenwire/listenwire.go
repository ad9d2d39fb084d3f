// Package listenwire holds what leaderrun and leaderrun-listen (which
// serves --listen's endpoint) must agree on about the pipes between them,
// so that neither can change them alone.
//
// leaderrun writes, on leaderrun-listen's standard input, a Hello line and
// then one State line each time its state changes, each a JSON object.
// leaderrun-listen answers on its standard output with one line once it
// has bound the address ("bound ADDR" or "error MESSAGE", the message one
// line and free of secrets), then "ack SEQ BOOT" for each State it has
// applied: from BOOT on (its CLOCK_BOOTTIME reading, in nanoseconds) its
// answers reflect that state. It exits when its input ends.
package listenwire

import "time"

// MaxLine is the longest line leaderrun-listen reads on its standard
// input.
const MaxLine = 64 << 10

// Lead is how long before the stop point /leader answers 503: the guard
// and the run stop the child at that point on their own, and an answer
// written just before it must not still call this instance the leader
// when the child is being stopped.
const Lead = 100 * time.Millisecond

// Buckets are the upper bounds, in seconds, of the renewal latency
// histogram.
var Buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Roles of an instance, State.Role.
const (
	RoleWaiting  = "waiting"  // waiting for the lease, its holder unknown (the store is unavailable, or not asked yet)
	RoleStandby  = "standby"  // waiting while another instance holds the lease
	RoleHolding  = "holding"  // holding the lease
	RoleStopping = "stopping" // the child is being stopped, or has ended: the lease is about to be given up
	RoleLost     = "lost"     // leadership was lost; the child is stopped
	RoleEnded    = "ended"    // the run is over; leaderrun exits
)

// Hello is the first line: what does not change during a run.
type Hello struct {
	// Addr is --listen's address: "host:port" or "unix:PATH".
	Addr string `json:"addr"`
	// Name is the lease name; Holder this instance's label.
	Name   string `json:"name"`
	Holder string `json:"holder"`
	// Slots is --slots (1 for a plain lease).
	Slots int `json:"slots"`
}

// Holder is an instance holding the lease, as /status shows it.
type Holder struct {
	Label string    `json:"holder"`
	Token uint64    `json:"token,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Slot  int       `json:"slot,omitempty"`
}

// State is the run's state; each line replaces the previous one whole.
type State struct {
	// Seq increases with every line; leaderrun-listen acknowledges it.
	Seq uint64 `json:"seq"`
	// Role is one of the Role constants.
	Role string `json:"role"`
	// Started says the child has been started (it may have ended since).
	Started bool `json:"started,omitempty"`
	// Holder is who holds the lease, as far as this instance knows: itself
	// while holding, another while a standby; nil when unknown.
	Holder *Holder `json:"holder_info,omitempty"`
	// StopAt is the stop point while holding, a CLOCK_BOOTTIME reading in
	// nanoseconds: /leader answers 503 from Lead before it, whatever else
	// it was told. 0 means the lease does not expire (file store).
	StopAt int64 `json:"stop_at,omitempty"`
	// LastRenewal is when the last confirmed renewal was sent (wall clock;
	// zero: none yet).
	LastRenewal time.Time `json:"last_renewal,omitzero"`
	// Renewals is the latency of the renewals answered, as a histogram over
	// Buckets: Counts[i] renewals took at most Buckets[i] (and more than
	// the bucket before); the last element counts the rest.
	Renewals       Histogram `json:"renewals"`
	RenewalsFailed uint64    `json:"renewals_failed,omitempty"`
	// Transitions counts the changes of holder this instance has seen,
	// its own acquisitions included.
	Transitions uint64 `json:"transitions,omitempty"`
	// Last is how this instance's last run ended; nil until one has.
	Last *Outcome `json:"last,omitempty"`
}

// Histogram counts observations in Buckets (len(Buckets)+1 counts).
type Histogram struct {
	Counts []uint64 `json:"counts,omitempty"`
	Sum    float64  `json:"sum,omitempty"` // seconds
}

// Observe counts one observation of d.
func (h *Histogram) Observe(d time.Duration) {
	if h.Counts == nil {
		h.Counts = make([]uint64, len(Buckets)+1)
	}
	s := d.Seconds()
	i := 0
	for i < len(Buckets) && s > Buckets[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += s
}

// Outcome is how a run ended, as --metrics-file says it.
type Outcome struct {
	Outcome string `json:"outcome"`
	Code    int    `json:"code"`
}
