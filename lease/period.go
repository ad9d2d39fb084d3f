package lease

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Period is a span of time that repeats, for leaderrun --once-per: either
// a fixed duration counted from the Unix epoch (1970-01-01 00:00 UTC), so
// that "4s" or "6h" periods start at the same instants on every host, a
// calendar unit (hour, day, week from Monday, month) in a time zone, whose
// length follows the zone's clock changes: a day of a spring-forward is 23
// hours long, or the span between two fire times of a cron schedule in a
// time zone (cronperiod.go). The zero Period is not valid; use ParsePeriod.
type Period struct {
	every time.Duration // fixed periods; 0 for calendar ones
	unit  calendarUnit
	cron  *cron.SpecSchedule // a cron schedule's (cronperiod.go); nil otherwise
	spec  string             // the schedule as given, normalised
	loc   *time.Location
}

type calendarUnit int

const (
	noUnit calendarUnit = iota
	unitHour
	unitDay
	unitWeek
	unitMonth
)

var (
	unitNames   = map[calendarUnit]string{unitHour: "hour", unitDay: "day", unitWeek: "week", unitMonth: "month"}
	unitAdverbs = map[calendarUnit]string{unitHour: "hourly", unitDay: "daily", unitWeek: "weekly", unitMonth: "monthly"}
)

// MinPeriod and MaxPeriod bound a fixed period: shorter than a second is
// below what every store's clock resolves (Azure's is a second); longer
// than a leap year is a typo.
const (
	MinPeriod = time.Second
	MaxPeriod = 366 * 24 * time.Hour
)

// ErrBadPeriod is what ParsePeriod's errors wrap.
var ErrBadPeriod = errors.New("not a period")

// ParsePeriod reads a period: hour, day, week or month (also hourly, daily,
// weekly, monthly; any case) in loc, a cron schedule in loc (5 fields such
// as "0 21 * * *", or @yearly, @monthly, @weekly, @daily, @hourly), or a
// duration from MinPeriod to MaxPeriod such as 4s or 24h, counted from the
// Unix epoch (loc does not apply to it). A nil loc means UTC.
func ParsePeriod(s string, loc *time.Location) (Period, error) {
	if loc == nil {
		loc = time.UTC
	}
	if IsSchedule(s) {
		return parseCron(s, loc)
	}
	word := strings.ToLower(strings.TrimSpace(s))
	for u, name := range unitNames {
		if word == name || word == unitAdverbs[u] {
			return Period{unit: u, loc: loc}, nil
		}
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < MinPeriod || d > MaxPeriod {
		return Period{}, fmt.Errorf("%w: %q: want %s", ErrBadPeriod, s, PeriodForms())
	}
	return Period{every: d, loc: time.UTC}, nil
}

// PeriodForms says what ParsePeriod reads, for a message about a value it
// refused: "hour, day, week or month, or a duration from 1s to 8784h such
// as 4s or 24h".
func PeriodForms() string {
	return fmt.Sprintf("hour, day, week or month, a cron schedule such as '0 21 * * *' or @daily, or a duration from %s to %s such as 4s or 24h", FormatDuration(MinPeriod), FormatDuration(MaxPeriod))
}

// Calendar reports whether p depends on its time zone (a calendar unit:
// hour, day, week, month; or a cron schedule) rather than being a fixed
// duration.
func (p Period) Calendar() bool { return p.unit != noUnit || p.cron != nil }

// Schedule is p's cron schedule as given (its fields joined by one
// space), or "" when p is not one.
func (p Period) Schedule() string { return p.spec }

// Location is the time zone of a calendar period (UTC for a fixed one).
func (p Period) Location() *time.Location {
	if p.loc == nil {
		return time.UTC
	}
	return p.loc
}

// String describes p: "day in Europe/Berlin", "week in UTC", "4s".
func (p Period) String() string {
	if p.cron != nil {
		return "'" + p.spec + "' in " + p.Location().String()
	}
	if p.Calendar() {
		return unitNames[p.unit] + " in " + p.Location().String()
	}
	return FormatDuration(p.every)
}

// Bounds returns the period that holds t: start <= t < end.
func (p Period) Bounds(t time.Time) (start, end time.Time) {
	if p.cron != nil {
		return p.cronBounds(t)
	}
	if !p.Calendar() {
		if p.every <= 0 {
			panic("lease: Bounds of a zero Period")
		}
		start = epochFloor(t.Unix(), int64(t.Nanosecond()), p.every)
		return start, start.Add(p.every)
	}
	loc := p.Location()
	lt := t.In(loc)
	y, m, d := lt.Date()
	switch p.unit {
	case unitHour:
		start = t.Add(-time.Duration(lt.Minute())*time.Minute - time.Duration(lt.Second())*time.Second - time.Duration(lt.Nanosecond()))
		end = start.Add(time.Hour)
		// A zone whose offset changes by less than an hour within this hour
		// (Lord Howe Island: 30 minutes) ends it at the next whole local hour.
		if el := end.In(loc); el.Minute() != 0 || el.Second() != 0 {
			if e := end.Add(-time.Duration(el.Minute())*time.Minute - time.Duration(el.Second())*time.Second); e.After(t) {
				end = e
			}
		}
		return start, end
	case unitDay:
		return dayStart(y, m, d, loc), dayStart(y, m, d+1, loc)
	case unitWeek:
		back := (int(lt.Weekday()) + 6) % 7 // days since Monday
		return dayStart(y, m, d-back, loc), dayStart(y, m, d-back+7, loc)
	default: // unitMonth
		return dayStart(y, m, 1, loc), dayStart(y, m+1, 1, loc)
	}
}

// epochFloor is the latest multiple of every after the Unix epoch that is
// not after the instant s seconds + n nanoseconds since it.
func epochFloor(s, n int64, every time.Duration) time.Time {
	const sec = int64(time.Second)
	e := int64(every)
	if e%sec == 0 {
		es := e / sec
		return time.Unix(floorDiv(s, es)*es, 0)
	}
	// Sub-second parts: within ±292 years of the epoch, nanoseconds fit.
	ns := s*sec + n
	return time.Unix(0, floorDiv(ns, e)*e)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// dayStart is the first instant of the local date y-m-d (normalised: day 0
// is the last of the month before) in loc, or of the first date after it
// that the zone has (Samoa skipped 2011-12-30). That is local midnight,
// except where the zone's clock skips midnight (a spring-forward at 00:00:
// the day begins at 01:00) or shows it twice (a fall-back to 00:00: the
// first one).
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Date()
	naive := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // midnight at offset 0
	c := time.Date(y, m, d, 0, 0, 0, 0, loc)
	best := time.Time{}
	// Each offset the zone has around midnight gives a candidate; the day
	// starts at the earliest one that is on that date or later while the
	// instant before is earlier.
	for _, probe := range []time.Time{c.Add(-12 * time.Hour), c, c.Add(12 * time.Hour)} {
		_, off := probe.In(loc).Zone()
		cand := naive.Add(-time.Duration(off) * time.Second)
		if dateBefore(cand.In(loc), y, m, d) || !dateBefore(cand.Add(-time.Nanosecond).In(loc), y, m, d) {
			continue
		}
		if best.IsZero() || cand.Before(best) {
			best = cand
		}
	}
	if best.IsZero() {
		return c
	}
	return best
}

// dateBefore reports whether t's date is before y-m-d.
func dateBefore(t time.Time, y int, m time.Month, d int) bool {
	ty, tm, td := t.Date()
	return ty < y || ty == y && (tm < m || tm == m && td < d)
}

// ClockTokens is the optional capability of a Store whose fencing tokens
// are minted as the larger of the previous token plus one and the store's
// own clock in microseconds since the Unix epoch: the file store (the
// host's clock), Redis (TIME), PostgreSQL (clock_timestamp()) and Azure
// Blob (the response's Date). A token then also says when its acquisition
// happened on the store's clock (TokenTime), so that hosts whose clocks
// differ agree on it, and later acquisitions never read earlier. etcd's
// tokens are revisions, not clock readings.
type ClockTokens interface {
	// TokensCountClock marks the capability; it does nothing.
	TokensCountClock()
}

// TokenTime is the store clock reading a token of a ClockTokens store
// stands for: when its acquisition was granted (a little later when
// several acquisitions fell within one microsecond, or the store's clock
// stepped back).
func TokenTime(token uint64) time.Time {
	return time.UnixMicro(int64(min(token, 1<<62))).UTC()
}

// ErrTokenAhead marks an acquisition refused because the store's fencing
// counter is ahead of the store's clock by more than MaxClockSkew (written
// ahead by hand or by another user, or left there by a clock that stepped
// back): its token would not say when it was granted, --once-per could not
// tell its period, and its run would be left out of the history as "from
// the future". The concrete error also wraps ErrConfig (exit 125): tokens
// never go back, so only a person can decide to restart the counter.
var ErrTokenAhead = errors.New("fencing counter ahead of the store's clock")

// TokenAhead reports whether token, minted by a ClockTokens store whose
// clock read clock at the acquisition, is further ahead of that clock than
// MaxClockSkew.
func TokenAhead(token uint64, clock time.Time) bool {
	return token > uint64(clock.Add(MaxClockSkew).UnixMicro())
}

// TokenAheadError is the refusal of an acquisition of name whose token
// was ahead of the store's clock (TokenAhead); counter names the counter
// and how to remove it, for the message.
func TokenAheadError(name string, token uint64, clock time.Time, counter string) error {
	ahead := TokenTime(token).Sub(clock).Round(time.Second)
	return NewError(fmt.Sprintf("lease %s: the fencing counter is %v ahead of the store's clock (token %d, clock %s), more than the %v clocks may differ by; nothing was started. "+
		"Check the store's clock; if it is right, the counter was written ahead: remove %s once no holder runs (the next tokens then follow the clock, below %d, so a resource that saw that token must accept lower ones)",
		name, ahead, token, clock.UTC().Format(time.RFC3339), MaxClockSkew, counter, token), ErrTokenAhead, ErrConfig)
}
