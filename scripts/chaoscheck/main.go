// Command chaoscheck is the independent checker of scripts/chaos.sh. It
// reads only the logs a chaos run left in DIR (see scripts/chaosrun) and
// prints what happened: faults injected by kind, runs, overlaps (two
// children of different leaderrun instances alive at once), orphans (a child
// alive after its leaderrun exited), fencing token order violations and the
// fencing resource's decisions.
//
//	chaoscheck [-json] DIR
//
// It exits 1 on any overlap no documented cause explains, any stale write
// the fencing resource accepted, any token order violation, any orphan, or
// a run without a single child run; 2 when the logs cannot be read.
//
// A child's lifetime, for overlaps, is from its start record to its last
// sign of life: its last fence write or its end record, all stamped by the
// child itself (CLOCK_MONOTONIC). So an overlap is reported only when the
// older child provably ran after the newer one had started; an observer's
// delay never creates one.
//
// Documented causes of an overlap (README, Safety model and Chaos testing):
//   - pause: the older child's leaderrun was SIGSTOPped for longer than the
//     TTL, the newer child started during that pause (or within 1 s after
//     it), and the older child was gone within TTL+1 s of the SIGCONT;
//   - lost: the store lost the lease under the older child's leaderrun (key
//     deleted, lock file replaced or deleted, blob lease broken, server
//     restarted without its data or SIGKILLed with unsaved data) after the
//     older child's leaderrun acquired it (taken as: at most 1 s before the
//     older child started) and before the newer child started, and the
//     older child was gone within TTL+1 s of it
//     (the holder learns at its next renewal).
//
// Either way the fencing resource must have rejected every write of the
// older child made after the newer child's first write: an accepted one is
// a stale write and fails the check.
//
// A run with slots (chaosrun -slots N) is N leases in one: overlaps, token
// order and stale writes are judged per slot (two children of one slot
// alive at once is an overlap; children of different slots may run
// together), a child outside slots 0 to N-1 fails the check, and across
// the slots every child's token must be above that of every child that
// had started before its leaderrun was even forked (see slots.go).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

func main() {
	asJSON := flag.Bool("json", false, "print the report as JSON")
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: chaoscheck [-json] DIR") }
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	r, err := check(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaoscheck:", err)
		os.Exit(2)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
	} else {
		r.print(os.Stdout)
	}
	if len(r.Failures) > 0 {
		os.Exit(1)
	}
}

// record is any line of the logs.
type record struct {
	Ev        string `json:"ev"`
	T         int64  `json:"t"`
	PID       int    `json:"pid"`
	Wrapper   int    `json:"wrapper"`
	Contender string `json:"contender"`
	Token     uint64 `json:"token"`
	Reason    string `json:"reason"`
	OK        bool   `json:"ok"`
	High      uint64 `json:"high"`
	Kind      string `json:"kind"`
	Phase     string `json:"phase"`
	Code      int    `json:"code"`
	Signal    string `json:"signal"`
	Slot      int    `json:"slot"`
	T0        int64  `json:"t0"` // wrap_start: before the fork
	// Tokens: a change's done record, the fencing tokens of the leases it
	// removed, where the store tells (etcd, Redis, PostgreSQL, MariaDB).
	Tokens []uint64 `json:"tokens"`
}

type meta struct {
	Store      string `json:"store"`
	TTL        int64  `json:"ttl_ns"`
	Contenders int    `json:"contenders"`
	Duration   string `json:"duration"`
	Start      int64  `json:"start"`
	Slots      int    `json:"slots"`
}

// run is one child process, started by one leaderrun instance.
type run struct {
	PID, Wrapper int
	Contender    string
	Token        uint64
	Start, Last  int64 // own stamps: start record, last sign of life
	Ended        bool
	Reason       string
	firstWrite   int   // index in the fence log, -1 if none
	wrapExit     int64 // when the driver saw its leaderrun exit; 0 unknown
	wrapT0       int64 // when the driver was about to fork its leaderrun; 0 unknown
	Slot         int   // with slots, the child's slot
}

// fault is one injected fault; pauses, restarts and blob lease breaks span [T, End]
// (a break: from its call to its answer).
type fault struct {
	Kind   string
	PID    int
	T, End int64    // End: cont/up, or T for instant faults, MaxInt64 if never
	Tokens []uint64 // the tokens of the leases a change removed, if known
}

// Overlap is two children of different instances alive at once.
type Overlap struct {
	Older, Newer   string // "pid P (leaderrun W, token N)"
	StartNS, LenNS int64  // newer child's start (ns since the run began), and how long the older one was still seen alive
	Cause          string // pause, lost, or "" (unexplained)
	Fault          string // the fault that explains it, or the last fault before it
}

// Report is what chaoscheck prints.
type Report struct {
	Store               string         `json:"store"`
	Duration            string         `json:"duration"`
	TTL                 string         `json:"ttl"`
	Contenders          int            `json:"contenders"`
	Faults              map[string]int `json:"faults"`
	FaultsTotal         int            `json:"faults_total"`
	RunsStarted         int            `json:"runs_started"`
	RunsCompleted       int            `json:"runs_completed"`
	RunsStopped         int            `json:"runs_stopped"`
	RunsKilled          int            `json:"runs_killed"`
	WrapperExits        map[string]int `json:"leaderrun_exits"`
	Overlaps            int            `json:"overlaps"`
	OverlapsPause       int            `json:"overlaps_pause"`
	OverlapsLost        int            `json:"overlaps_lost"`
	OverlapsUnexplained int            `json:"overlaps_unexplained"`
	LongestOverlap      string         `json:"longest_overlap"`
	OverlapList         []Overlap      `json:"overlap_list,omitempty"`
	Orphans             int            `json:"orphans"`
	TokenViolations     int            `json:"token_violations"`
	TokenResets         int            `json:"token_resets"`
	// TokensLostFirst counts children whose token is below an earlier
	// child's because the store lost their lease before they started
	// (lostFirst): no violation.
	TokensLostFirst    int      `json:"tokens_lost_first"`
	TokenViolationList []string `json:"token_violation_list,omitempty"`
	WritesAccepted     int      `json:"writes_accepted"`
	WritesRejected     int      `json:"writes_rejected"`
	StaleRejected      int      `json:"stale_writes_rejected"`
	StaleAccepted      int      `json:"stale_writes_accepted"`
	NewestRejected     int      `json:"newest_leader_writes_rejected"`
	Slots              int      `json:"slots,omitempty"`
	MaxConcurrent      int      `json:"max_concurrent,omitempty"`
	SlotViolations     int      `json:"slot_violations,omitempty"`
	Failures           []string `json:"failures,omitempty"`
}

func readLines(path string, fn func(record) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A torn last line (a process killed mid-write) is skipped.
			continue
		}
		if err := fn(r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

func check(dir string) (*Report, error) {
	var m meta
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("meta.json: %w", err)
	}
	ttl := m.TTL
	r := &Report{Store: m.Store, Duration: m.Duration, TTL: time.Duration(ttl).String(), Contenders: m.Contenders,
		Faults: map[string]int{}, WrapperExits: map[string]int{}, Slots: max(m.Slots, 1)}

	runs := map[int]*run{}    // by child PID: the latest run with that PID, while reading runs.log
	byPID := map[int][]*run{} // every run with that PID (PIDs are reused in a long run), by start
	var order []*run
	err = readLines(filepath.Join(dir, "runs.log"), func(rec record) error {
		switch rec.Ev {
		case "start":
			if old := runs[rec.PID]; old != nil && !old.Ended {
				// PID reused while the old run never logged an end: close it.
				old.Ended = true
			}
			x := &run{PID: rec.PID, Wrapper: rec.Wrapper, Contender: rec.Contender, Token: rec.Token, Start: rec.T, Last: rec.T, firstWrite: -1, Slot: rec.Slot}
			if m.Slots <= 1 {
				x.Slot = 0
			}
			runs[rec.PID] = x
			byPID[rec.PID] = append(byPID[rec.PID], x)
			order = append(order, x)
		case "end":
			x := runs[rec.PID]
			if x == nil {
				return fmt.Errorf("end of unknown child %d", rec.PID)
			}
			x.Ended, x.Reason = true, rec.Reason
			x.Last = max(x.Last, rec.T)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var writes []record
	var writer []*run // writer[i] made writes[i]
	err = readLines(filepath.Join(dir, "fence.log"), func(rec record) error {
		if rec.Ev != "write" {
			return nil
		}
		// The run of that PID (and leaderrun) that started last before the write.
		var x *run
		for _, c := range byPID[rec.PID] {
			if c.Start <= rec.T && (rec.Wrapper == 0 || c.Wrapper == rec.Wrapper) {
				x = c
			}
		}
		if x == nil {
			return fmt.Errorf("fence write by child %d before its start record", rec.PID)
		}
		x.Last = max(x.Last, rec.T)
		if x.firstWrite < 0 {
			x.firstWrite = len(writes)
		}
		writes = append(writes, rec)
		writer = append(writer, x)
		return nil
	})
	if err != nil {
		return nil, err
	}

	// Wrappers: PID → [start, exit] intervals (PIDs may be reused over a long run).
	type wrap struct{ start, exit, t0 int64 }
	wraps := map[int][]*wrap{}
	err = readLines(filepath.Join(dir, "wrappers.log"), func(rec record) error {
		switch rec.Ev {
		case "wrap_start":
			wraps[rec.PID] = append(wraps[rec.PID], &wrap{start: rec.T, t0: rec.T0})
		case "wrap_exit":
			ws := wraps[rec.PID]
			if len(ws) == 0 {
				return fmt.Errorf("exit of unknown leaderrun %d", rec.PID)
			}
			ws[len(ws)-1].exit = rec.T
			key := fmt.Sprint(rec.Code)
			if rec.Signal != "" {
				key = rec.Signal
			}
			r.WrapperExits[key]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, x := range order {
		for _, w := range wraps[x.Wrapper] {
			if w.start <= x.Start && (w.exit == 0 || w.exit >= x.Start) {
				x.wrapExit, x.wrapT0 = w.exit, w.t0
			}
		}
	}

	var faults []*fault
	open := map[string]*fault{} // kind+pid → fault awaiting its cont/up
	err = readLines(filepath.Join(dir, "faults.log"), func(rec record) error {
		if rec.Ev != "fault" || rec.Kind == "end" {
			return nil
		}
		key := fmt.Sprint(rec.Kind, "/", rec.PID)
		switch rec.Phase {
		case "cont", "up", "done": // a pause, a restart, a change to the record ends
			if f := open[key]; f != nil {
				f.End, f.Tokens = rec.T, rec.Tokens
				delete(open, key)
			} else if f := open[rec.Kind]; f != nil { // restarts: the new server has a new PID
				f.End, f.Tokens = rec.T, rec.Tokens
				delete(open, rec.Kind)
			}
			return nil
		}
		f := &fault{Kind: rec.Kind, PID: rec.PID, T: rec.T, End: rec.T, Tokens: rec.Tokens}
		switch rec.Phase {
		case "stop":
			f.End = math.MaxInt64
			open[key] = f
		case "kill", "begin":
			f.End = math.MaxInt64
			open[rec.Kind] = f
		}
		faults = append(faults, f)
		r.Faults[rec.Kind]++
		r.FaultsTotal++
		return nil
	})
	if err != nil {
		return nil, err
	}

	sort.SliceStable(order, func(i, j int) bool { return order[i].Start < order[j].Start })
	rel := func(t int64) int64 { return t - m.Start }
	name := func(x *run) string {
		return fmt.Sprintf("child %d (leaderrun %d, %s, token %d)", x.PID, x.Wrapper, x.Contender, x.Token)
	}
	lastFaultBefore := func(t int64) string {
		var best *fault
		for _, f := range faults {
			if f.T <= t && (best == nil || f.T > best.T) {
				best = f
			}
		}
		if best == nil {
			return "none"
		}
		return fmt.Sprintf("%s at %v (%v before)", best.Kind, time.Duration(rel(best.T)).Round(time.Millisecond), time.Duration(t-best.T).Round(time.Millisecond))
	}

	// Runs.
	for _, x := range order {
		r.RunsStarted++
		switch {
		case x.Ended && x.Reason == "done":
			r.RunsCompleted++
		case x.Ended:
			r.RunsStopped++
		default:
			r.RunsKilled++
		}
		if x.wrapExit != 0 && x.Last > x.wrapExit {
			r.Orphans++
			r.Failures = append(r.Failures, fmt.Sprintf("orphan: %s alive %v after its leaderrun exited",
				name(x), time.Duration(x.Last-x.wrapExit)))
		}
	}

	// Overlaps and their causes.
	// store_restart_persist_sigkill: Azurite did not stop on SIGTERM in time
	// and was SIGKILLed; it autosaves every 5 s, so recent writes are lost.
	lost := map[string]bool{"key_delete": true, "key_edit": true, "lockfile_replace": true, "lockfile_delete": true, "lease_break": true,
		"store_restart_empty": true, "store_restart_persist_sigkill": true}
	// Azurite's clean shutdown does not always write out its last
	// autosave window either: beside stress-ng, a SIGTERM restart that
	// ended within its 3 s lost two slots' leases acquired 1.6 s and 4.6 s
	// before it (their holders' next renewals were answered
	// LeaseIdMismatchWithLeaseOperation, and they stopped their children).
	// The "lost" rule below still holds the older child to dying within a
	// TTL of the fault.
	if m.Store == "azurite" {
		lost["store_restart_persist"] = true
	}
	const slack = int64(time.Second)
	// lostFirst reports whether x's lease was removed by a change (the
	// change's done record names x's token) before x's child started, and
	// x's child ended within a TTL of it, as a holder that learns of the
	// loss at its next renewal does. A leaderrun that acquired before the
	// change and was slow to start its child (a loaded machine) then starts
	// it after another instance took the freed lease, with a higher token,
	// and started its own: the child started later is the older leader,
	// and a fencing resource rightly refuses it.
	lostFirst := func(x *run) bool {
		for _, f := range faults {
			if lost[f.Kind] && slices.Contains(f.Tokens, x.Token) && f.T <= x.Start && x.Last <= sat(f.End, ttl+slack) {
				return true
			}
		}
		return false
	}
	// newer reports whether b is a newer leader than a: its child started
	// later, unless one of the two lost a lease it took first (lostFirst).
	newer := func(a, b *run) bool {
		if b.Start > a.Start {
			return !(b.Token < a.Token && lostFirst(b))
		}
		return a.Token < b.Token && lostFirst(a)
	}
	var longest int64
	for j, b := range order {
		for _, a := range order[:j] {
			if a.Wrapper == b.Wrapper || a.Last <= b.Start || a.Slot != b.Slot {
				continue // with slots, only two children of one slot overlap
			}
			o := Overlap{Older: name(a), Newer: name(b), StartNS: rel(b.Start), LenNS: a.Last - b.Start}
			for _, f := range faults {
				switch {
				case strings.HasPrefix(f.Kind, "holder_pause") && f.PID == a.Wrapper && f.End-f.T > ttl &&
					f.T <= b.Start && b.Start <= sat(f.End, slack) && a.Last <= sat(f.End, ttl+slack):
					o.Cause = "pause"
				case lost[f.Kind] && a.Start <= sat(f.End, slack) && f.T <= b.Start && a.Last <= sat(f.End, ttl+slack),
					b.Token < a.Token && lostFirst(b) && lost[f.Kind] && slices.Contains(f.Tokens, b.Token):
					o.Cause = "lost"
				default:
					continue
				}
				o.Fault = fmt.Sprintf("%s at %v", f.Kind, time.Duration(rel(f.T)).Round(time.Millisecond))
				break
			}
			if o.Cause == "" {
				o.Fault = "last fault before: " + lastFaultBefore(b.Start)
			}
			r.Overlaps++
			switch o.Cause {
			case "pause":
				r.OverlapsPause++
			case "lost":
				r.OverlapsLost++
			default:
				r.OverlapsUnexplained++
				r.Failures = append(r.Failures, fmt.Sprintf("unexplained overlap at %v: %s still alive %v after %s started; %s",
					time.Duration(o.StartNS).Round(time.Millisecond), o.Older, time.Duration(o.LenNS).Round(time.Microsecond), o.Newer, o.Fault))
			}
			longest = max(longest, o.LenNS)
			r.OverlapList = append(r.OverlapList, o)
		}
	}
	r.LongestOverlap = time.Duration(longest).Round(time.Microsecond).String()

	// Token order: every child's token is above every earlier child's (of
	// its slot, with slots; checkSlots adds the order across slots).
	r.checkSlots(order, name, lastFaultBefore)
	for _, order := range bySlot(order) {
		var high uint64
		var highRun, prev *run
		for _, x := range order {
			if highRun != nil && x.Token < high && lostFirst(x) {
				r.TokensLostFirst++ // the older leader: see lostFirst
				continue
			}
			if prev != nil && x.Token <= prev.Token {
				r.TokenResets++ // the sequence itself went back (violations count every run until it recovers)
			}
			prev = x
			if highRun != nil && x.Token <= high {
				r.TokenViolations++
				msg := fmt.Sprintf("token went back at %v: %s started after %s; %s",
					time.Duration(rel(x.Start)).Round(time.Millisecond), name(x), name(highRun), lastFaultBefore(x.Start))
				if len(r.TokenViolationList) < 20 {
					r.TokenViolationList = append(r.TokenViolationList, msg)
				}
				if r.TokenViolations <= 5 {
					r.Failures = append(r.Failures, msg)
				}
			}
			if highRun == nil || x.Token > high {
				high, highRun = x.Token, x
			}
		}
	}
	if r.TokenViolations > 5 {
		r.Failures = append(r.Failures, fmt.Sprintf("… %d token order violations in all", r.TokenViolations))
	}

	// Fencing: a write is stale when a child that started later had
	// already written (the resource then knew of a newer leader).
	newestOf := map[int]*run{} // by slot: a slot's resource is its own
	for i, w := range writes {
		x := writer[i]
		newest := newestOf[x.Slot]
		stale := newest != nil && newest != x && newer(x, newest)
		switch {
		case w.OK && stale:
			r.StaleAccepted++
			if r.StaleAccepted <= 5 {
				r.Failures = append(r.Failures, fmt.Sprintf("stale write accepted at %v: %s wrote after %s had written",
					time.Duration(rel(w.T)).Round(time.Millisecond), name(x), name(newest)))
			}
		case w.OK:
		case stale:
			r.StaleRejected++
		default:
			r.NewestRejected++
		}
		if w.OK {
			r.WritesAccepted++
		} else {
			r.WritesRejected++
		}
		if x.firstWrite == i && (newest == nil || newer(newest, x)) {
			newestOf[x.Slot] = x
		}
	}
	if r.StaleAccepted > 5 {
		r.Failures = append(r.Failures, fmt.Sprintf("… %d stale writes accepted in all", r.StaleAccepted))
	}
	if r.RunsStarted == 0 {
		r.Failures = append(r.Failures, "no child ever ran")
	}
	return r, nil
}

// sat adds d to t without overflowing past "never".
func sat(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

func (r *Report) print(w io.Writer) {
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var fk []string
	for _, k := range kinds {
		fk = append(fk, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	codes := make([]string, 0, len(r.WrapperExits))
	for k := range r.WrapperExits {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	var ex []string
	for _, k := range codes {
		ex = append(ex, fmt.Sprintf("%s×%d", k, r.WrapperExits[k]))
	}
	fmt.Fprintf(w, "chaos check: store %s, %s, ttl %s, %d contenders\n", r.Store, r.Duration, r.TTL, r.Contenders)
	fmt.Fprintf(w, "  faults injected      %d: %s\n", r.FaultsTotal, strings.Join(fk, ", "))
	fmt.Fprintf(w, "  runs                 %d started: %d completed, %d stopped by a signal, %d killed\n", r.RunsStarted, r.RunsCompleted, r.RunsStopped, r.RunsKilled)
	fmt.Fprintf(w, "  leaderrun exits      %s\n", strings.Join(ex, " "))
	fmt.Fprintf(w, "  overlaps             %d: %d after a leaderrun pause > TTL, %d after the store lost the lease, %d unexplained (longest %s)\n",
		r.Overlaps, r.OverlapsPause, r.OverlapsLost, r.OverlapsUnexplained, r.LongestOverlap)
	if r.Slots > 1 {
		fmt.Fprintf(w, "  slots                %d: at most %d children alive at once; %d slot violations (a slot outside 0-%d, a token given twice or below one of a child started before)\n", r.Slots, r.MaxConcurrent, r.SlotViolations, r.Slots-1)
	}
	fmt.Fprintf(w, "  orphans              %d\n", r.Orphans)
	fmt.Fprintf(w, "  token violations     %d runs not above every earlier token (the sequence went back %d times)\n", r.TokenViolations, r.TokenResets)
	if r.TokensLostFirst > 0 {
		fmt.Fprintf(w, "  tokens lost first    %d runs below an earlier run's token, each started after the store lost its lease (no violation)\n", r.TokensLostFirst)
	}
	fmt.Fprintf(w, "  fenced writes        %d accepted, %d rejected (%d stale writes rejected, %d of the newest leader rejected); %d stale writes accepted\n",
		r.WritesAccepted, r.WritesRejected, r.StaleRejected, r.NewestRejected, r.StaleAccepted)
	for _, o := range r.OverlapList {
		if o.Cause != "" {
			fmt.Fprintf(w, "  overlap (%s) at %v for %v: %s → %s; %s\n", o.Cause, time.Duration(o.StartNS).Round(time.Millisecond),
				time.Duration(o.LenNS).Round(time.Microsecond), o.Older, o.Newer, o.Fault)
		}
	}
	if len(r.Failures) == 0 {
		fmt.Fprintln(w, "PASS")
		return
	}
	for _, f := range r.Failures {
		fmt.Fprintln(w, "FAIL:", f)
	}
}
