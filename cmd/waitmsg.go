package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// remindEvery is how often a waiting leaderrun says it still waits (at -v);
// tests shorten it.
var remindEvery = time.Minute

// outageFirstNote and outageNoteEvery space the default-level lines about a
// store that keeps failing while leaderrun waits; tests shorten them.
var outageFirstNote, outageNoteEvery = 10 * time.Second, time.Minute

// waitReporter words lease.Acquire's waiting events for the user: the first line says how long leaderrun will wait and
// for whom, then a line for each new holder, and a reminder every minute at
// -v.
func waitReporter(log *slog.Logger, name string, wait time.Duration) func(lease.WaitEvent) {
	var outage, nextNote time.Time // when the current run of store failures began; when to say it again
	return func(ev lease.WaitEvent) {
		by := heldBy(ev.By, time.Now())
		switch ev.Kind {
		case lease.WaitStarted:
			upTo := ""
			if wait > 0 {
				upTo = " up to " + humanDuration(wait)
			}
			log.Info(fmt.Sprintf("waiting%s for lease %s (%s)", upTo, name, by), "event", "waiting")
		case lease.WaitHolderChanged:
			log.Info(fmt.Sprintf("lease %s is now %s; still waiting", name, by), "event", "holder_changed")
		case lease.WaitReminder:
			log.Debug(fmt.Sprintf("still waiting for lease %s after %s (%s)", name, humanDuration(ev.Waited), by), "event", "still_waiting")
		case lease.WaitStoreUnavailable:
			// Said at once, again after outageFirstNote, then every
			// outageNoteEvery at the default level (a typo in a host name
			// looks like an outage, and the default --wait is forever);
			// each failure at -v.
			now := time.Now()
			level, long := slog.LevelDebug, ""
			switch {
			case ev.First || outage.IsZero():
				outage, nextNote = now, now.Add(outageFirstNote)
				level = slog.LevelWarn
			case !now.Before(nextNote):
				nextNote = now.Add(outageNoteEvery)
				level, long = slog.LevelWarn, " (failing for "+humanDuration(now.Sub(outage))+")"
			}
			log.Log(context.Background(), level, fmt.Sprintf("%s%s; retrying in %s until it answers", ev.Err.Error(), long, humanDuration(ev.RetryIn)), "event", "store_unavailable_retry")
		}
	}
}

// heldBy describes a holder: "held by web-1:42 since 14:03:07, token 7".
func heldBy(h lease.Holder, now time.Time) string {
	s := "held by " + holderName(h.Label)
	if !h.Since.IsZero() {
		s += " since " + FormatTimeZone(h.Since, now)
	}
	if h.Token != 0 {
		s += fmt.Sprintf(", token %d", h.Token)
	}
	if !h.HeldUntil.IsZero() {
		s += ", finished and kept taken until " + FormatTimeZone(h.HeldUntil, now) + " by --hold-at-least"
	}
	return s
}

// humanDuration rounds d for a message: whole seconds from a minute up,
// tenths of a second below, milliseconds below a second.
func humanDuration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		s := d.Round(time.Second).String() // "10m0s" → "10m", "1h0m0s" → "1h"
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}
