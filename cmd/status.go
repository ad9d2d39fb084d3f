package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
}

// statusCommand prints who holds name: exit 0 held, 3 free, 125 error.
func statusCommand(ctx context.Context, c *cli.Context, name string, e env, log *slog.Logger) *outcome {
	if err := lease.ValidateName(name); err != nil {
		return classify(usageError{err})
	}
	if err := dispatch(c.String("store")); err != nil {
		return classify(err)
	}
	store, err := openStoreFor(ctx, c.String("store"), StoreOptions{CallTimeout: 5 * time.Second, Getenv: e.getenv, Log: log})
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := store.Status(sctx, name)
	if err != nil {
		return classify(fmt.Errorf("status of lease %s: %w", name, err))
	}
	out := statusJSON{Name: name}
	if h != nil {
		out.Held, out.Holder, out.Token, out.RemainingMS = true, h.Holder, h.Token, h.Remaining.Milliseconds()
		if !h.Since.IsZero() {
			since := h.Since
			out.Since = &since
		}
	}
	if c.Bool("json") {
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.stdio.Out, string(b))
	} else if h == nil {
		fmt.Fprintf(e.stdio.Out, "%s: free\n", name)
	} else {
		line := fmt.Sprintf("%s: held by %s", name, h.Holder)
		if !h.Since.IsZero() {
			now := time.Now()
			line += fmt.Sprintf(" since %s (%s ago)", FormatTimeZone(h.Since, now), now.Sub(h.Since).Round(time.Second))
		}
		line += fmt.Sprintf(", token %d", h.Token)
		if h.Remaining > 0 {
			line += fmt.Sprintf(", expires in %v unless renewed", h.Remaining.Round(100*time.Millisecond))
		}
		fmt.Fprintln(e.stdio.Out, line)
	}
	if h == nil {
		return &outcome{code: ExitStatusFree, level: slog.LevelDebug, msg: "lease " + name + " is free"}
	}
	return &outcome{code: 0, level: slog.LevelDebug, msg: "lease " + name + " is held"}
}
