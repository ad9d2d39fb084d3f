package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/leaseview"
	"github.com/leaderrun/leaderrun/lease"
)

// statusCommand prints who holds name and who stands by: exit 0 held, 3
// free, 4 nothing known, 125 error.
func statusCommand(ctx context.Context, o *options, name string, e env, log *slog.Logger) *outcome {
	if err := lease.ValidateName(name); err != nil {
		return classify(usageError{err})
	}
	if err := e.dispatch(o.store); err != nil {
		return classify(err)
	}
	store, err := openForReading(ctx, o.store, o.spell, e, log)
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := leaseview.Read(sctx, store, name, 0)
	if err != nil {
		return classify(fmt.Errorf("status of lease %s: %w", name, err))
	}
	h := v.Holder
	var current uint64
	if h != nil && h.HeldUntil.IsZero() {
		current = h.Token // running: its start record is not the last run
	}
	out := leaseview.NewStatus(name, v, leaseview.LastRun(sctx, store, name, current, v))
	out.Unknown = h == nil && len(v.Standbys) == 0 && out.LastRun == nil && !leaseview.AnyRun(sctx, store, name)
	if o.json {
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

// unknownText is status's line for a lease the store knows nothing of.
const unknownText = "nothing known (no holder, standby or recorded run in this store: a name never used with it, or mistyped)"

// printStatus writes status's text: the holder's line, then the last run
// and the standbys, indented.
func printStatus(w io.Writer, out leaseview.Status, v leaseview.View, now time.Time) {
	name, h := out.Name, v.Holder
	switch {
	case out.Unknown:
		fmt.Fprintf(w, "%s: %s\n", name, unknownText)
	case v.NSlots > 1:
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
		fmt.Fprintf(w, "  %s\n", lastRunText(out.LastRun.Run, now))
	}
	for i, s := range v.Standbys {
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
