package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/lease"
)

// statusJSON is the --json form of status: stable field names for scripts.
type statusJSON struct {
	Name        string     `json:"name"`
	Held        bool       `json:"held"`
	Holder      string     `json:"holder,omitempty"`
	Token       uint64     `json:"token,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	RemainingMS int64      `json:"remaining_ms,omitempty"`
	// HeldUntil is the end of a --hold-at-least hold: the holder is done.
	HeldUntil *time.Time `json:"held_until,omitempty"`
	// Standbys are the live waiting instances in takeover order; absent
	// from the output of watch.
	Standbys []standbyJSON `json:"standbys,omitempty"`
	// LastRun is the newest run in the store's history other than the
	// current holder's; absent from the output of watch, and when the store
	// keeps no history.
	LastRun *lease.Run `json:"last_run,omitempty"`
	// Unknown says the store knows nothing of the lease: free, with no
	// standby and no recorded run (status exits ExitStatusUnknown).
	Unknown bool `json:"unknown,omitempty"`
	// Slots is the number of slots of a lease taken with --slots, and
	// Holders the holder of each held slot (slots.go).
	Slots   int        `json:"slots,omitempty"`
	Holders []slotJSON `json:"holders,omitempty"`
}

// standbyJSON is one waiting instance.
type standbyJSON struct {
	Holder   string    `json:"holder"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
}

// leaseView is what status and watch show: the holder (nil when free) and
// the live standbys in takeover order (nil when the store keeps none).
type leaseView struct {
	holder   *lease.Holder
	standbys []lease.Candidate
	// slots holds the held slots of a lease with --slots (nslots above 1;
	// holder is then the first of them), see withSlots.
	slots  []lease.Holder
	nslots int
}

// readView reads the holder and, where the store keeps a candidate
// registry, the standbys, in one store call. A registry that cannot be read
// (say, a SAS without list permission) costs only the standbys.
func readView(ctx context.Context, store lease.Store, name string) (leaseView, error) {
	if reg, ok := store.(lease.CandidateRegistry); ok {
		cs, h, err := reg.Candidates(ctx, name)
		if err == nil {
			return withSlots(ctx, store, name, leaseView{holder: h, standbys: cs})
		}
		if ctx.Err() != nil {
			return leaseView{holder: h, standbys: cs}, err
		}
	}
	h, err := store.Status(ctx, name)
	if err != nil {
		return leaseView{holder: h}, err
	}
	return withSlots(ctx, store, name, leaseView{holder: h})
}

// statusCommand prints who holds name and who stands by: exit 0 held, 3
// free, 4 nothing known, 125 error.
func statusCommand(ctx context.Context, c *cli.Context, name string, e env, log *slog.Logger) *outcome {
	if err := lease.ValidateName(name); err != nil {
		return classify(usageError{err})
	}
	if err := e.dispatch(c.String("store")); err != nil {
		return classify(err)
	}
	store, err := openStoreFor(ctx, c.String("store"), lease.OpenOptions{CallTimeout: 5 * time.Second, Getenv: e.getenv, Log: log})
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := readView(sctx, store, name)
	if err != nil {
		return classify(fmt.Errorf("status of lease %s: %w", name, err))
	}
	h := v.holder
	var current uint64
	if h != nil && h.HeldUntil.IsZero() {
		current = h.Token // running: its start record is not the last run
	}
	out := newStatusJSON(name, v, statusLastRun(sctx, store, name, current, v)) // slots.go
	out.Unknown = h == nil && len(v.standbys) == 0 && out.LastRun == nil && !anyRun(sctx, store, name)
	if c.Bool("json") {
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.stdio.Out, string(b))
	} else {
		printStatus(e.stdio.Out, out, v, time.Now())
	}
	if out.Unknown {
		return &outcome{code: ExitStatusUnknown, level: slog.LevelDebug, msg: "nothing is known of lease " + name}
	}
	if h == nil {
		return &outcome{code: ExitStatusFree, level: slog.LevelDebug, msg: "lease " + name + " is free"}
	}
	return &outcome{code: 0, level: slog.LevelDebug, msg: "lease " + name + " is held"}
}

// anyRun reports whether the store's history may hold a run of name: it
// does, or the store keeps none, or it cannot be read (then nothing can be
// said either way). Only a history read without error that has no run says
// the store knows nothing of name.
func anyRun(ctx context.Context, store lease.Store, name string) bool {
	h, ok := store.(lease.History)
	if !ok {
		return true
	}
	runs, err := h.Runs(ctx, name, 1)
	return err != nil || len(runs) > 0
}

// unknownText is status's line for a lease the store knows nothing of.
const unknownText = "nothing known (no holder, standby or recorded run in this store: a name never used with it, or mistyped)"

// newStatusJSON is status's answer for lease name: its view v and the last
// run (nil when none is recorded or the store keeps no history).
func newStatusJSON(name string, v leaseView, last *lease.Run) statusJSON {
	out := statusJSON{Name: name, LastRun: last}
	if h := v.holder; h != nil {
		out.Held, out.Holder, out.Token, out.RemainingMS = true, h.Label, h.Token, h.Remaining.Milliseconds()
		if !h.Since.IsZero() {
			since := h.Since
			out.Since = &since
		}
		if !h.HeldUntil.IsZero() {
			until := h.HeldUntil
			out.HeldUntil = &until
		}
	}
	for _, s := range v.standbys {
		out.Standbys = append(out.Standbys, standbyJSON{Holder: s.Label, Priority: s.Priority, Since: s.Since})
	}
	slotsJSON(&out, v) // --slots
	return out
}

// printStatus writes status's text: the holder's line, then the last run
// and the standbys, indented.
func printStatus(w io.Writer, out statusJSON, v leaseView, now time.Time) {
	name, h := out.Name, v.holder
	switch {
	case out.Unknown:
		fmt.Fprintf(w, "%s: %s\n", name, unknownText)
	case v.nslots > 1:
		printSlots(w, name, v, now) // --slots
	case h == nil:
		fmt.Fprintf(w, "%s: free\n", name)
	default:
		line := fmt.Sprintf("%s: held by %s", name, holderName(h.Label))
		if !h.Since.IsZero() {
			line += fmt.Sprintf(" since %s (%s ago)", FormatTimeZone(h.Since, now), now.Sub(h.Since).Round(time.Second))
		}
		if h.Token != 0 {
			line += fmt.Sprintf(", token %d", h.Token)
		}
		if !h.HeldUntil.IsZero() {
			line += holdText(h.HeldUntil, now)
		} else if h.Remaining > 0 {
			line += fmt.Sprintf(", expires in %v unless renewed", h.Remaining.Round(100*time.Millisecond))
		}
		fmt.Fprintln(w, line)
	}
	if out.LastRun != nil {
		fmt.Fprintf(w, "  %s\n", lastRunText(*out.LastRun, now))
	}
	for i, s := range v.standbys {
		fmt.Fprintf(w, "  standby %d: %s\n", i+1, standbyText(s, now))
	}
}

// standbyText describes a standby: "web-2:41, priority 5, waiting since
// 14:03:07 (2m ago)".
func standbyText(s lease.Candidate, now time.Time) string {
	var b strings.Builder
	b.WriteString(printable(s.Label))
	fmt.Fprintf(&b, ", priority %d", s.Priority)
	if !s.Since.IsZero() {
		fmt.Fprintf(&b, ", waiting since %s (%s ago)", FormatTimeZone(s.Since, now), now.Sub(s.Since).Round(time.Second))
	}
	return b.String()
}
