package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/lease"
)

// watchCommand prints one line (or JSON object) each time the holder of name
// changes, until INT or TERM. It polls Status, so it works on every store;
// --interval bounds how late a change is seen.
func watchCommand(ctx context.Context, c *cli.Context, name string, e env, log *slog.Logger) *outcome {
	if err := lease.ValidateName(name); err != nil {
		return classify(usageError{err})
	}
	interval := c.Duration("interval")
	if interval < MinWatchInterval {
		return classify(usagef("--interval %v: want at least %v (watch polls the store that often)", interval, MinWatchInterval))
	}
	// Polls are sequential, so a short interval must not shorten the call
	// timeout: a slow answer only delays the next poll.
	if err := dispatch(c.String("store")); err != nil {
		return classify(err)
	}
	store, err := openStoreFor(ctx, c.String("store"), StoreOptions{CallTimeout: min(max(interval, time.Second), 5*time.Second), Getenv: e.getenv, Log: log})
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	first, last, started := true, "", time.Now()
	var failing error
	for {
		sctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
		h, err := store.Status(sctx, name)
		cancel()
		switch {
		case ctx.Err() != nil:
			return &outcome{code: 0, level: slog.LevelDebug, msg: "watch ended"}
		case err != nil:
			if first {
				return classify(fmt.Errorf("watching lease %s: %w", name, err))
			}
			if failing == nil {
				log.Warn("status failed; still watching", "lease", name, "err", err)
			}
			failing = err
		default:
			failing = nil
			key := "free"
			if h != nil {
				key = fmt.Sprintf("%s/%d", h.Holder, h.Token)
			}
			if first || key != last {
				printWatch(e, c.Bool("json"), name, h, started)
				first, last = false, key
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return &outcome{code: 0, level: slog.LevelDebug, msg: "watch ended"}
		case <-t.C:
		}
	}
}

func printWatch(e env, asJSON bool, name string, h *lease.Holder, started time.Time) {
	now := time.Now()
	if asJSON {
		out := struct {
			Time time.Time `json:"time"`
			statusJSON
		}{Time: now, statusJSON: statusJSON{Name: name}}
		if h != nil {
			out.Held, out.Holder, out.Token = true, h.Holder, h.Token
			if !h.Since.IsZero() {
				since := h.Since
				out.Since = &since
			}
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.stdio.Out, string(b))
		return
	}
	// A watch runs for days: the time carries the date once it is not the
	// day the watch started.
	stamp := FormatTime(now, started)
	if h == nil {
		fmt.Fprintf(e.stdio.Out, "%s %s: free\n", stamp, name)
		return
	}
	fmt.Fprintf(e.stdio.Out, "%s %s: held by %s, token %d\n", stamp, name, h.Holder, h.Token)
}
