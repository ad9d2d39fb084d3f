package run

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/lease"
)

// outageFirstNote and outageNoteEvery space the default-level lines about a
// store that keeps failing while leaderrun waits; tests shorten them.
var outageFirstNote, outageNoteEvery = 10 * time.Second, time.Minute

// waitReporter words lease.Acquire's waiting events for the user: the first line says how long leaderrun will wait and
// for whom, then a line for each new holder, and a reminder every minute at
// -v.
func waitReporter(log *slog.Logger, name string, wait time.Duration) func(lease.WaitEvent) {
	var outage, nextNote time.Time // when the current run of store failures began; when to say it again
	return func(ev lease.WaitEvent) {
		by := say.HeldBy(ev.By, time.Now())
		switch ev.Kind {
		case lease.WaitStarted:
			upTo := ""
			if wait > 0 {
				upTo = " up to " + say.Duration(wait)
			}
			log.Info(fmt.Sprintf("waiting%s for lease %s (%s)", upTo, name, by), "event", "waiting")
		case lease.WaitHolderChanged:
			log.Info(fmt.Sprintf("lease %s is now %s; still waiting", name, by), "event", "holder_changed")
		case lease.WaitReminder:
			log.Debug(fmt.Sprintf("still waiting for lease %s after %s (%s)", name, say.Duration(ev.Waited), by), "event", "still_waiting")
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
				level, long = slog.LevelWarn, " (failing for "+say.Duration(now.Sub(outage))+")"
			}
			log.Log(context.Background(), level, fmt.Sprintf("%s%s; retrying in %s until it answers", ev.Err.Error(), long, say.Duration(ev.RetryIn)), "event", "store_unavailable_retry")
		}
	}
}
