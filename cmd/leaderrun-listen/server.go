package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/internal/boottime"
	"github.com/leaderrun/leaderrun/internal/listenwire"
	"github.com/leaderrun/leaderrun/internal/promtext"
)

// server answers from the last state applied; apply and the handlers may
// run at once.
type server struct {
	hello listenwire.Hello
	clock boottime.Clock
	mu    sync.Mutex
	st    listenwire.State
}

func newServer(h listenwire.Hello) *server {
	return &server{hello: h, clock: boottime.Boot{}, st: listenwire.State{Role: listenwire.RoleWaiting}}
}

// apply makes st the state answered from now on; it returns the
// CLOCK_BOOTTIME reading from which every answer reflects it.
func (s *server) apply(st listenwire.State) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Seq > s.st.Seq {
		s.st = st
	}
	return s.clock.Now()
}

// leads says whether /leader answers 200 in state st at boot clock
// reading now.
func leads(st listenwire.State, now time.Duration) bool {
	return st.Role == listenwire.RoleHolding && st.Started &&
		(st.StopAt == 0 || now < time.Duration(st.StopAt)-listenwire.Lead)
}

func leaderCode(leading bool) int {
	if leading {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}

// snapshot is the state and the clock reading it is answered at.
func (s *server) snapshot() (listenwire.State, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st, s.clock.Now()
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	st, now := s.snapshot()
	switch r.URL.Path {
	case "/leader":
		code := leaderCode(leads(st, now))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		if code == http.StatusOK {
			_, _ = w.Write([]byte("leader\n"))
		} else {
			_, _ = w.Write([]byte("not leader: " + st.Role + "\n"))
		}
	case "/status":
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(statusOf(s.hello, st, now))
		_, _ = w.Write(append(b, '\n'))
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(metricsText(s.hello, st, now))
	default:
		http.NotFound(w, r)
	}
}

// statusJSON is /status: the fields of `leaderrun status --json` this
// instance knows, and its own role.
type statusJSON struct {
	Name   string     `json:"name"`
	Held   bool       `json:"held"`
	Holder string     `json:"holder,omitempty"`
	Token  uint64     `json:"token,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Slot   *int       `json:"slot,omitempty"`
	Slots  int        `json:"slots,omitempty"`
	// This instance.
	Role        string              `json:"role"`
	Leader      bool                `json:"leader"`
	Instance    string              `json:"instance"`
	Started     bool                `json:"started"`
	LastRenewal *time.Time          `json:"last_renewal,omitempty"`
	StopInMS    *int64              `json:"stop_in_ms,omitempty"`
	LastRun     *listenwire.Outcome `json:"last_run,omitempty"`
}

func statusOf(h listenwire.Hello, st listenwire.State, now time.Duration) statusJSON {
	out := statusJSON{Name: h.Name, Role: st.Role, Leader: leads(st, now), Instance: h.Holder, Started: st.Started, LastRun: st.Last}
	if h.Slots > 1 {
		out.Slots = h.Slots
	}
	if hd := st.Holder; hd != nil {
		out.Held, out.Holder, out.Token = true, hd.Label, hd.Token
		if !hd.Since.IsZero() {
			out.Since = &hd.Since
		}
		if h.Slots > 1 {
			out.Slot = &hd.Slot
		}
	}
	if !st.LastRenewal.IsZero() {
		out.LastRenewal = &st.LastRenewal
	}
	if st.Role == listenwire.RoleHolding && st.StopAt != 0 {
		ms := max(time.Duration(st.StopAt)-now, 0).Milliseconds()
		out.StopInMS = &ms
	}
	return out
}

// metricsText is /metrics.
func metricsText(h listenwire.Hello, st listenwire.State, now time.Duration) []byte {
	var w promtext.Writer
	l := []string{"name", h.Name, "holder", h.Holder}
	leading := "0"
	if leads(st, now) {
		leading = "1"
	}
	w.Gauge("leaderrun_leading", "1 while this instance holds the lease and runs its command (what /leader answers 200 for), 0 otherwise.", leading, l...)
	w.Family("leaderrun_role", "gauge", "This instance's role: 1 for its role, 0 for the others.")
	for _, r := range []string{listenwire.RoleWaiting, listenwire.RoleStandby, listenwire.RoleHolding, listenwire.RoleStopping, listenwire.RoleLost, listenwire.RoleEnded} {
		v := "0"
		if r == st.Role {
			v = "1"
		}
		w.Sample("leaderrun_role", v, append(l, "role", r)...)
	}
	if st.Role == listenwire.RoleHolding && st.Holder != nil {
		w.Gauge("leaderrun_fencing_token", "The fencing token of the lease this instance holds.", strconv.FormatUint(st.Holder.Token, 10), l...)
	}
	if !st.LastRenewal.IsZero() {
		w.Gauge("leaderrun_last_renewal_timestamp_seconds", "When the last confirmed renewal of the lease was sent (Unix time).", promtext.Unix(st.LastRenewal), l...)
	}
	histogram(&w, "leaderrun_renewal_duration_seconds", "How long the lease's renewals took to be answered.", st.Renewals, l)
	w.Family("leaderrun_renewals_failed_total", "counter", "Renewals of the lease that failed and were retried.")
	w.Sample("leaderrun_renewals_failed_total", strconv.FormatUint(st.RenewalsFailed, 10), l...)
	w.Family("leaderrun_lease_transitions_total", "counter", "Changes of the lease's holder this instance has seen, its own acquisitions included.")
	w.Sample("leaderrun_lease_transitions_total", strconv.FormatUint(st.Transitions, 10), l...)
	if st.Last != nil {
		w.Gauge("leaderrun_last_run_exit_code", "leaderrun's exit code for this instance's last run (the command's own, 128+N for signal N, 123 stepped down, 124 lost).", strconv.Itoa(st.Last.Code), l...)
		w.Family("leaderrun_last_run_outcome", "gauge", "How this instance's last run ended: 1 for its outcome, 0 for the others.")
		for _, o := range promtext.Outcomes {
			v := "0"
			if string(o) == st.Last.Outcome {
				v = "1"
			}
			w.Sample("leaderrun_last_run_outcome", v, append(l, "outcome", string(o))...)
		}
	}
	return w.Bytes()
}

// histogram writes h as a Prometheus histogram over listenwire.Buckets.
func histogram(w *promtext.Writer, name, help string, h listenwire.Histogram, l []string) {
	w.Family(name, "histogram", help)
	var cum uint64
	for i, le := range listenwire.Buckets {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		w.Sample(name+"_bucket", strconv.FormatUint(cum, 10), append(l, "le", promtext.Float(le))...)
	}
	if n := len(listenwire.Buckets); n < len(h.Counts) {
		cum += h.Counts[n]
	}
	w.Sample(name+"_bucket", strconv.FormatUint(cum, 10), append(l, "le", "+Inf")...)
	w.Sample(name+"_sum", promtext.Float(h.Sum), l...)
	w.Sample(name+"_count", strconv.FormatUint(cum, 10), l...)
}
