package lease

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// A cron schedule's periods: the period that holds t is the span between
// the schedule's last fire time at or before t and its next one after t,
// in the Period's zone. The schedule is read by robfig/cron (5 fields, or
// @yearly, @monthly, @weekly, @daily, @hourly) and evaluated on the zone's
// wall clock, so that clock changes do what a crontab's reader expects
// (as Vixie cron and cronie do for a job at a fixed time, cron(8)):
//
//   - a fire time the clock skips (02:30 on a spring-forward night in
//     Europe/Berlin) fires when the clock jumps over it (at 03:00): the day's
//     period is not lost;
//   - a fire time the clock shows twice (02:30 on a fall-back night) fires
//     at its first showing only.
//
// Either way a period runs from one fire time to the next, so a day's
// period on those nights is 23 or 25 hours long.

// cronParser reads the 5-field form and the descriptors; @every, which is
// not anchored to the clock, is refused by parseCron.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// IsSchedule reports whether ParsePeriod reads s as a cron schedule
// rather than a word or a duration: it has fields, or is a descriptor
// (@daily).
func IsSchedule(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "@") || strings.ContainsAny(s, " \t")
}

// parseCron reads spec as a schedule in loc.
func parseCron(spec string, loc *time.Location) (Period, error) {
	spec = strings.Join(strings.Fields(spec), " ")
	if strings.HasPrefix(spec, "@every") {
		return Period{}, fmt.Errorf("%w: %q: @every is not tied to the clock; give a duration such as 4h instead", ErrBadPeriod, spec)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return Period{}, fmt.Errorf("%w: %q: give the time zone with --once-per-zone", ErrBadPeriod, spec)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return Period{}, fmt.Errorf("%w: %q: %v; want %s", ErrBadPeriod, spec, err, PeriodForms())
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return Period{}, fmt.Errorf("%w: %q: want %s", ErrBadPeriod, spec, PeriodForms())
	}
	ss.Location = time.UTC // wall-clock times, mapped to instants by wallInstant
	// robfig/cron looks 5 years ahead at most: a schedule that does not
	// fire twice in that time (February 30th) has no period.
	ref := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if first := ss.Next(ref); first.IsZero() || ss.Next(first).IsZero() {
		return Period{}, fmt.Errorf("%w: %q: the schedule never fires, or less than twice in 5 years", ErrBadPeriod, spec)
	}
	return Period{cron: ss, spec: spec, loc: loc}, nil
}

// wallClock is t's reading on loc's wall clock, as a UTC time.
func wallClock(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// wallInstant is the first instant at which loc's wall clock shows w (a
// UTC time standing for a wall-clock reading), or, when the clock skips
// w, the instant it jumps over it.
func wallInstant(w time.Time, loc *time.Location) time.Time {
	var best, jump time.Time
	// The offsets in force within 14 hours (the widest offset) of w.
	for _, probe := range []time.Time{w.Add(-14 * time.Hour), w, w.Add(14 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		c := w.Add(-time.Duration(off) * time.Second)
		switch shown := wallClock(c, loc); {
		case shown.Equal(w):
			if best.IsZero() || c.Before(best) {
				best = c
			}
		case shown.After(w):
			// Shown later than w: if the zone's offset changed just
			// before c, the change may be the jump over w.
			if s, _ := c.In(loc).ZoneBounds(); !s.IsZero() && wallClock(s, loc).After(w) && !wallClock(s.Add(-time.Nanosecond), loc).After(w) {
				if jump.IsZero() || s.Before(jump) {
					jump = s
				}
			}
		}
	}
	if !best.IsZero() {
		return best
	}
	return jump
}

// cronBounds is Bounds for a cron Period.
func (p Period) cronBounds(t time.Time) (start, end time.Time) {
	loc := p.Location()
	// Fire times near t on the wall clock can be as far from t's own
	// reading as the zone's offsets around t differ (twice, for a skipped
	// span), so the search starts that much earlier.
	spread := offsetSpread(t, loc)
	from := wallClock(t, loc).Add(-2*spread - time.Second)
	fire := func(w time.Time) time.Time { return wallInstant(w, loc) }
	// end: the first fire time after t.
	w := p.cron.Next(from)
	for !w.IsZero() && !fire(w).After(t) {
		w = p.cron.Next(w)
	}
	if w.IsZero() {
		end = t.Add(MaxPeriod) // cannot happen for a schedule parseCron took
	} else {
		end = fire(w)
	}
	// start: the last fire time at or before t, found by looking back
	// further and further.
	for back := time.Minute; back < 6*366*24*time.Hour; back *= 2 {
		w := p.cron.Next(from.Add(-back))
		if w.IsZero() || fire(w).After(t) {
			continue
		}
		for {
			n := p.cron.Next(w)
			if n.IsZero() || fire(n).After(t) {
				return fire(w), end
			}
			w = n
		}
	}
	return t.Add(-MaxPeriod), end // cannot happen for a schedule parseCron took
}

// offsetSpread is how far apart loc's offsets are within a day of t.
func offsetSpread(t time.Time, loc *time.Location) time.Duration {
	lo, hi := 0, 0
	for i, d := range []time.Duration{-26 * time.Hour, 0, 26 * time.Hour} {
		_, off := t.Add(d).In(loc).Zone()
		if i == 0 || off < lo {
			lo = off
		}
		if i == 0 || off > hi {
			hi = off
		}
	}
	return time.Duration(hi-lo) * time.Second
}
