package run

import (
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// acquiredText is the "lease X acquired" line, saying how long it took when
// leaderrun had to wait.
func acquiredText(name string, waited time.Duration) string {
	if waited > 0 {
		return fmt.Sprintf("lease %s acquired after %s", name, say.Duration(waited))
	}
	return fmt.Sprintf("lease %s acquired", name)
}

// stopText says how leaderrun stopped the child, as it actually happened:
// after the grace, at the lease's kill point, or both signals at once.
func stopText(name string, stop syscall.Signal, res runner.Result) string {
	sig := unix.SignalName(stop)
	switch {
	case !res.Killed && res.Signal == syscall.SIGKILL && stop != syscall.SIGKILL:
		// Not ours: the guard's SIGKILL at the kill point landed first.
		return fmt.Sprintf("stopped %s with %s, then SIGKILL at the lease's kill point (from the guard)", name, sig)
	case !res.Killed:
		return fmt.Sprintf("stopped %s with %s", name, sig)
	case res.KillPoint && res.KillAfter == 0:
		return fmt.Sprintf("killed %s with %s and SIGKILL at once: the lease's kill point had come", name, sig)
	case res.KillPoint:
		return fmt.Sprintf("stopped %s with %s, then SIGKILL %s later at the lease's kill point", name, sig, say.Duration(res.KillAfter))
	default:
		return fmt.Sprintf("stopped %s with %s, then SIGKILL after the %s grace", name, sig, say.Duration(res.KillAfter))
	}
}

// reportShrunkGrace says, at -v, that the grace the user did
// not set was shrunk to fit a short --ttl: it changes how long the child has
// to stop cleanly.
func reportShrunkGrace(log *slog.Logger, asked, got lease.Timing) {
	if !asked.Explicit.Grace && got.Grace < asked.Grace {
		log.Debug(fmt.Sprintf("grace shrunk from %s to %s to fit --ttl %s (give --grace, or a longer --ttl, to choose)",
			say.Duration(asked.Grace), say.Duration(got.Grace), asked.TTL), "event", "grace_shrunk")
	}
}

// lostWhy is " (why)" for the cause of a lost lease, or "" when the cause
// is the bare sentinel lease.ErrLost, which says nothing more than "lost".
// A cause of kind lease.ErrLost says why in its text and never says "lost"
// itself (see lease's sentinel errors).
func lostWhy(cause error) string {
	if why := cause.Error(); why != "" && cause != lease.ErrLost { //nolint:errorlint // the sentinel itself, not what wraps it
		return " (" + why + ")"
	}
	return ""
}

// conflictText is the final line when the lease stayed held: who holds it
// (with the date when the acquisition was not today) and whether leaderrun
// waited for it.
func conflictText(rc Config, by lease.Holder) string {
	waited := ""
	if rc.Wait > 0 {
		waited = "; gave up after --wait " + say.Duration(rc.Wait)
	}
	if by.Slots > 1 {
		return slotsConflictText(rc, by, waited) // --slots
	}
	return fmt.Sprintf("lease %s is %s%s; %s not started", rc.Name, say.HeldBy(by, time.Now()), waited, rc.Args[0])
}
