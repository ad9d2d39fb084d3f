package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/leaderrun/leaderrun/internal/leaseview"
	"github.com/leaderrun/leaderrun/internal/stderrlog"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// watchFirstWait is how long watch keeps asking a store that does not
// answer (lease.ErrUnavailable: slow, or down) for the lease's first view
// before it gives up (exit 125). A loaded server can take longer than one
// call timeout, and that is a wait, not an error; a store that never
// answers is one.
const watchFirstWait = 30 * time.Second

// Floors below which a value is refused.
const (
	// MinWatchInterval is the shortest watch --interval: polling more than a
	// hundred times a second only loads the store, and a store call under
	// 10ms is already at the mercy of scheduling delays.
	MinWatchInterval = 10 * time.Millisecond
)

// watchCommand prints one line (or JSON object) for each change of the
// holder of name and each standby joining or leaving, until INT or TERM
// (or, with --once, the first change). Where the store can tell of changes
// (lease.ChangeWatcher: storetab's Watches) it reports them as they happen
// and polls every --interval only as a fallback; elsewhere it polls every
// --interval, jittered.
func watchCommand(ctx context.Context, o *options, name string, e env, log *slog.Logger) *outcome {
	if err := lease.ValidateName(name); err != nil {
		return classify(usageError{err})
	}
	interval := o.interval
	if interval < MinWatchInterval {
		return classify(usagef("%s: want at least %s (watch polls the store that often)", o.spell("interval", lease.FormatDuration(interval)), lease.FormatDuration(MinWatchInterval)))
	}
	if err := e.dispatch(o.store); err != nil {
		return classify(err)
	}
	// Polls are sequential, so a short interval must not shorten the call
	// timeout: a slow answer only delays the next poll.
	store, err := openForReading(ctx, o.store, o.spell, e, log)
	if err != nil {
		return classify(err)
	}
	defer store.Close()
	// INT is caught only when it was not inherited as ignored (a watch
	// started in the background of a script keeps ignoring it).
	ctx, stop := signal.NotifyContext(ctx, watchEndSignals()...)
	defer stop()
	// Ctrl-C left the terminal's cursor after the echoed ^C: the shell's
	// prompt starts on a fresh line.
	defer func() {
		if f := e.stdio.Err; f != nil && ctx.Err() != nil && isatty.IsTerminal(f.Fd()) {
			_, _ = f.WriteString(stderrlog.FreshLine(int(f.Fd())))
		}
	}()
	w := &watchLoop{store: store, name: name, interval: interval, log: log,
		p: watchPrinter{e: e, asJSON: o.json, name: name, started: time.Now()}, once: o.once}
	w.changes = watchChanges(ctx, store, name, log)
	if w.changes != nil {
		defer w.changes.Close()
	}
	return w.run(ctx)
}

// watchChanges starts watching the store for changes of name, when it can
// tell of them, before the first reading, so that nothing after it is
// missed; nil means polling only.
func watchChanges(ctx context.Context, store lease.Store, name string, log *slog.Logger) lease.Changes {
	cw, ok := store.(lease.ChangeWatcher)
	if !ok {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	changes, err := cw.WatchChanges(wctx, name)
	if err != nil {
		log.Debug("cannot watch the store for changes; polling", "lease", name, "err", err)
		return nil
	}
	return changes
}

// watchLoop is one watch: it reads the lease's view at each change (or
// every interval) and prints what changed.
type watchLoop struct {
	store    lease.Store
	name     string
	interval time.Duration
	changes  lease.Changes // nil: poll only
	log      *slog.Logger
	p        watchPrinter
	once     bool

	first   bool
	last    leaseview.View
	failing error
	highest uint64 // the highest token seen held
	slots   int    // the number of slots of the lease, once a view found it
}

// run watches until ctx ends or, with --once, the first change.
func (w *watchLoop) run(ctx context.Context) *outcome {
	ended := &outcome{code: 0, level: slog.LevelDebug, msg: "watch ended"}
	w.first = true
	giveUp := time.Now().Add(watchFirstWait)
	for {
		sctx, cancel := context.WithTimeout(ctx, max(w.interval, 5*time.Second))
		v, err := leaseview.Read(sctx, w.store, w.name, w.slots)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ended
		case err != nil:
			if w.first && (!errors.Is(err, lease.ErrUnavailable) || time.Now().After(giveUp)) {
				return classify(fmt.Errorf("watching lease %s: %w", w.name, err))
			}
			if w.failing == nil && w.first {
				w.log.Warn("no answer from the store yet; still trying", "lease", w.name, "err", err)
			} else if w.failing == nil {
				w.log.Warn("status failed; still watching", "lease", w.name, "err", err)
			}
			w.failing = err
		default:
			w.failing = nil
			if w.show(v) {
				return ended
			}
		}
		if err := nextChange(ctx, w.changes, w.last, w.interval); err != nil {
			return ended
		}
	}
}

// show prints what changed since the last view (on the first, the holder
// and the standbys, unless --once) and reports whether --once is satisfied.
func (w *watchLoop) show(v leaseview.View) (done bool) {
	if unrecorded(v.Holder, w.last.Holder, w.highest) {
		// Taken, but its holder not yet recorded (Azure writes the record
		// just after the lease): the next look will tell.
		v.Holder = w.last.Holder
	}
	if v.Holder != nil {
		w.highest = max(w.highest, v.Holder.Token)
	}
	if w.first {
		w.log.Debug("watching lease "+w.name, "event", "watching", "push", w.changes != nil)
		if !w.once && v.NSlots > 1 {
			printSlotChanges(w.p, w.last, v, true) // --slots
		} else if !w.once {
			w.p.holder(v.Holder)
			for _, s := range v.Standbys {
				w.p.standby("standby_waiting", s)
			}
		}
	} else if printChanges(w.p, w.last, v) && w.once {
		return true
	}
	w.first, w.last = false, v
	if v.NSlots > 1 {
		w.slots = v.NSlots
	}
	return false
}

// unrecorded reports whether h is a lease taken by a holder that has not
// written its record yet: no record at all, or the record of an earlier
// acquisition (tokens strictly increase, so a new acquisition never shows a
// token at or below one already seen, once the lease was seen free since).
func unrecorded(h, last *lease.Holder, highest uint64) bool {
	if h == nil {
		return false
	}
	if h.Label == "" && h.Token == 0 {
		return true
	}
	return h.Token != 0 && (h.Token < highest || h.Token == highest && last == nil)
}

// nextChange waits for the store to tell of a change, or at most interval
// (jittered ±25% when the store is only polled); it returns an error only
// when ctx ended.
func nextChange(ctx context.Context, changes lease.Changes, v leaseview.View, interval time.Duration) error {
	if changes == nil {
		t := time.NewTimer(interval*3/4 + rand.N(interval/2+1))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	nctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	_ = changes.Next(nctx, v.Holder, v.Standbys) // an error is a failed watch: the poll goes on
	if nctx.Err() == nil {
		return nil
	}
	return ctx.Err()
}

// holderKey identifies an acquisition for change detection.
func holderKey(h *lease.Holder) string {
	if h == nil {
		return "free"
	}
	return fmt.Sprintf("%s/%d", h.Label, h.Token)
}

// printChanges prints what differs from last to v: the holder first, then
// the standbys that left and those that joined. A standby that left because
// it took the lease is not reported as leaving. It reports whether anything
// was printed.
func printChanges(p watchPrinter, last, v leaseview.View) bool {
	changed := false
	newHolder := holderKey(last.Holder) != holderKey(v.Holder)
	if last.NSlots > 1 || v.NSlots > 1 { // --slots: each slot's holder
		changed, newHolder = printSlotChanges(p, last, v, false), false
	} else if newHolder {
		p.holder(v.Holder)
		changed = true
	}
	now := map[string]bool{}
	for _, s := range v.Standbys {
		now[s.ID] = true
	}
	was := map[string]bool{}
	for _, s := range last.Standbys {
		was[s.ID] = true
		if now[s.ID] {
			continue
		}
		if tookOver(s, v.Holder) {
			continue // it took over: the holder line says so
		}
		p.standby("standby_left", s)
		changed = true
	}
	for _, s := range v.Standbys {
		if !was[s.ID] {
			p.standby("standby_joined", s)
			changed = true
		}
	}
	return changed
}

// tookOver reports whether standby s left the line because it holds the
// lease h now, in this look or since an earlier one (its registration is
// removed after the acquisition, so a look may find it both holding and
// waiting): h is its acquisition (the same ID), or, where the store does
// not tell the holder's ID, h has its label.
func tookOver(s lease.Candidate, h *lease.Holder) bool {
	switch {
	case h == nil:
		return false
	case h.ID != "" && s.ID != "":
		return h.ID == s.ID
	}
	return h.Label == s.Label
}

// watchPrinter writes watch's lines.
type watchPrinter struct {
	e       env
	asJSON  bool
	name    string
	started time.Time
}

// stamp is the time of a line; a watch runs for days, so it carries the
// date once it is not the day the watch started.
func (p watchPrinter) stamp(now time.Time) string { return FormatTimeZone(now, p.started) }

func (p watchPrinter) holder(h *lease.Holder) {
	now := time.Now()
	if p.asJSON {
		out := struct {
			Time  time.Time `json:"time"`
			Event string    `json:"event"`
			leaseview.Status
		}{Time: now, Event: "holder", Status: leaseview.Status{Name: p.name}}
		if h != nil {
			out.Held, out.Holder, out.Token = true, h.Label, h.Token
			if !h.Since.IsZero() {
				since := h.Since
				out.Since = &since
			}
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(p.e.stdio.Out, string(b))
		return
	}
	if h == nil {
		fmt.Fprintf(p.e.stdio.Out, "%s %s: free\n", p.stamp(now), p.name)
		return
	}
	line := fmt.Sprintf("%s %s: held by %s", p.stamp(now), p.name, holderName(h.Label))
	if h.Token != 0 {
		line += fmt.Sprintf(", token %d", h.Token)
	}
	fmt.Fprintln(p.e.stdio.Out, line)
}

// standby prints a standby event: standby_waiting (at the start),
// standby_joined or standby_left.
func (p watchPrinter) standby(event string, s lease.Candidate) {
	now := time.Now()
	if p.asJSON {
		b, _ := json.Marshal(struct {
			Time  time.Time `json:"time"`
			Name  string    `json:"name"`
			Event string    `json:"event"`
			leaseview.Standby
		}{now, p.name, event, leaseview.Standby{Holder: s.Label, Priority: s.Priority, Since: s.Since}})
		fmt.Fprintln(p.e.stdio.Out, string(b))
		return
	}
	what := map[string]string{"standby_waiting": "is waiting", "standby_joined": "joined", "standby_left": "left"}[event]
	fmt.Fprintf(p.e.stdio.Out, "%s %s: standby %s %s (priority %d)\n", p.stamp(now), p.name, printable(s.Label), what, s.Priority)
}

// watchEndSignals are the signals that end a watch: INT (unless it was
// inherited as ignored) and TERM.
func watchEndSignals() []os.Signal {
	sigs := []os.Signal{syscall.SIGTERM}
	if !slices.Contains(runner.InheritedIgnored, os.Signal(syscall.SIGINT)) {
		sigs = append(sigs, os.Interrupt)
	}
	return sigs
}
