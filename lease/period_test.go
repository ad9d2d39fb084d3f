package lease_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the test host has installed

	"github.com/leaderrun/leaderrun/lease"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func period(t *testing.T, s string, loc *time.Location) lease.Period {
	t.Helper()
	p, err := lease.ParsePeriod(s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wallTime parses s, "2006-01-02 15:04:05 -0700", in loc.
func wallTime(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04:05 -0700", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// boundsCase is an instant t and the period around it (start to end)
// that the period spec (as --once-per takes it) in loc must give.
type boundsCase struct {
	name       string
	spec       string
	loc        *time.Location
	t          time.Time
	start, end time.Time
}

// checkBounds checks each case as a subtest named by its name.
func checkBounds(t *testing.T, cases []boundsCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start, end := period(t, tc.spec, tc.loc).Bounds(tc.t)
			if !start.Equal(tc.start) || !end.Equal(tc.end) {
				t.Errorf("Bounds(%v) = %v – %v, want %v – %v", tc.t, start, end, tc.start, tc.end)
			}
		})
	}
}

func TestParsePeriod(t *testing.T) {
	for _, s := range []string{"hour", "Hourly", "day", "DAILY", " week ", "weekly", "month", "monthly"} {
		if p := period(t, s, nil); !p.Calendar() || p.Location() != time.UTC {
			t.Errorf("%q: calendar %v in %v, want a calendar period in UTC", s, p.Calendar(), p.Location())
		}
	}
	for s, want := range map[string]string{"4s": "4s", "24h": "24h", "1500ms": "1.5s", "8784h": "8784h"} {
		p := period(t, s, zone(t, "Europe/Berlin"))
		if p.Calendar() || p.String() != want || p.Location() != time.UTC {
			t.Errorf("%q: %v (calendar %v, %v), want the fixed period %s in UTC", s, p, p.Calendar(), p.Location(), want)
		}
	}
	for _, s := range []string{"", "fortnight", "0s", "999ms", "-1h", "8785h", "daily2", "1d", "dai", "dayly"} {
		if _, err := lease.ParsePeriod(s, nil); !errors.Is(err, lease.ErrBadPeriod) {
			t.Errorf("%q: %v, want ErrBadPeriod", s, err)
		}
	}
	if got := period(t, "day", zone(t, "Europe/Berlin")).String(); got != "day in Europe/Berlin" {
		t.Errorf("String = %q", got)
	}
}

func TestPeriodBounds(t *testing.T) {
	berlin, apia, saoPaulo, havana, kathmandu := zone(t, "Europe/Berlin"), zone(t, "Pacific/Apia"), zone(t, "America/Sao_Paulo"), zone(t, "America/Havana"), zone(t, "Asia/Kathmandu")
	at := func(loc *time.Location, s string) time.Time { return wallTime(t, loc, s) }
	utc := func(s string) time.Time { return at(time.UTC, s+" +0000") }
	checkBounds(t, []boundsCase{
		{"4s from the epoch", "4s", nil, utc("2026-11-25 10:00:05"), utc("2026-11-25 10:00:04"), utc("2026-11-25 10:00:08")},
		{"4s on a boundary", "4s", nil, utc("2026-11-25 10:00:08"), utc("2026-11-25 10:00:08"), utc("2026-11-25 10:00:12")},
		{"7s before the epoch", "7s", nil, utc("1969-12-31 23:59:59"), utc("1969-12-31 23:59:53"), utc("1970-01-01 00:00:00")},
		{"1.5s", "1500ms", nil, time.Unix(4, 0), time.Unix(3, 0), time.Unix(4, 500e6)},
		{"168h starts on Thursdays (the epoch's weekday)", "168h", nil, utc("2026-11-25 10:00:00"), utc("2026-11-19 00:00:00"), utc("2026-11-26 00:00:00")},
		{"hour in UTC", "hour", nil, utc("2026-11-25 10:59:59"), utc("2026-11-25 10:00:00"), utc("2026-11-25 11:00:00")},
		{"hour at +05:45", "hour", kathmandu, utc("2026-11-25 10:00:00"), utc("2026-11-25 09:15:00"), utc("2026-11-25 10:15:00")},
		{"first 02:xx of a fall-back: its own hour", "hour", berlin, at(berlin, "2026-10-25 02:30:00 +0200"), at(berlin, "2026-10-25 02:00:00 +0200"), at(berlin, "2026-10-25 02:00:00 +0100")},
		{"second 02:xx of a fall-back: its own hour", "hour", berlin, at(berlin, "2026-10-25 02:30:00 +0100"), at(berlin, "2026-10-25 02:00:00 +0100"), at(berlin, "2026-10-25 03:00:00 +0100")},
		{"hour before a spring-forward ends at 03:00", "hour", berlin, at(berlin, "2026-03-29 01:59:00 +0100"), at(berlin, "2026-03-29 01:00:00 +0100"), at(berlin, "2026-03-29 03:00:00 +0200")},
		{"day in UTC", "day", nil, utc("2026-11-25 23:59:59"), utc("2026-11-25 00:00:00"), utc("2026-11-26 00:00:00")},
		{"day in Berlin", "day", berlin, utc("2026-11-25 23:30:00"), utc("2026-11-25 23:00:00"), utc("2026-11-26 23:00:00")},
		{"a spring-forward day has 23 hours", "day", berlin, at(berlin, "2026-03-29 12:00:00 +0200"), at(berlin, "2026-03-29 00:00:00 +0100"), at(berlin, "2026-03-30 00:00:00 +0200")},
		{"a fall-back day has 25 hours", "day", berlin, at(berlin, "2026-10-25 12:00:00 +0100"), at(berlin, "2026-10-25 00:00:00 +0200"), at(berlin, "2026-10-26 00:00:00 +0100")},
		{"a day without midnight starts at 01:00", "day", saoPaulo, at(saoPaulo, "2018-11-04 12:00:00 -0200"), at(saoPaulo, "2018-11-04 01:00:00 -0200"), at(saoPaulo, "2018-11-05 00:00:00 -0200")},
		{"the day before it ends then", "day", saoPaulo, at(saoPaulo, "2018-11-03 23:59:59 -0300"), at(saoPaulo, "2018-11-03 00:00:00 -0300"), at(saoPaulo, "2018-11-04 01:00:00 -0200")},
		{"a day with two midnights starts at the first", "day", havana, at(havana, "2023-11-05 00:30:00 -0500"), at(havana, "2023-11-05 00:00:00 -0400"), at(havana, "2023-11-06 00:00:00 -0500")},
		{"the day before a skipped day ends at the next", "day", apia, at(apia, "2011-12-29 12:00:00 -1000"), at(apia, "2011-12-29 00:00:00 -1000"), at(apia, "2011-12-31 00:00:00 +1400")},
		{"week from Monday", "week", nil, utc("2026-11-25 10:00:00"), utc("2026-11-23 00:00:00"), utc("2026-11-30 00:00:00")},
		{"Sunday night is the week's end", "week", nil, utc("2026-11-29 23:59:59"), utc("2026-11-23 00:00:00"), utc("2026-11-30 00:00:00")},
		{"Monday midnight starts one", "week", nil, utc("2026-11-30 00:00:00"), utc("2026-11-30 00:00:00"), utc("2026-12-07 00:00:00")},
		{"a week over a year's end", "week", nil, utc("2027-01-01 00:00:00"), utc("2026-12-28 00:00:00"), utc("2027-01-04 00:00:00")},
		{"a week in Berlin over a fall-back", "week", berlin, at(berlin, "2026-10-25 12:00:00 +0100"), at(berlin, "2026-10-19 00:00:00 +0200"), at(berlin, "2026-10-26 00:00:00 +0100")},
		{"month", "month", nil, utc("2026-02-28 23:59:59"), utc("2026-02-01 00:00:00"), utc("2026-03-01 00:00:00")},
		{"December", "month", nil, utc("2026-12-15 00:00:00"), utc("2026-12-01 00:00:00"), utc("2027-01-01 00:00:00")},
		{"a month with a spring-forward", "month", berlin, at(berlin, "2026-03-31 23:00:00 +0200"), at(berlin, "2026-03-01 00:00:00 +0100"), at(berlin, "2026-04-01 00:00:00 +0200")},
	})
}

// TestPeriodBoundsTile: in every zone, the periods around any instant
// tile time: each holds its instant, and the next one starts where it ends.
func TestPeriodBoundsTile(t *testing.T) {
	checkBoundsTile(t, rand.New(rand.NewPCG(1, 2)), 500,
		[]string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo", "America/Havana", "Asia/Kathmandu", "Pacific/Apia", "Pacific/Chatham"},
		[]string{"hour", "day", "week", "month", "5s", "6h", "24h"})
}

// checkBoundsTile checks, in each of zones, for each of specs (as
// --once-per takes them) and n random instants from 1980 to 2040, that
// the periods around the instant tile time: its period holds it, the
// period of the period's start is the same one, the next period starts
// where it ends, and the one before starts before it.
func checkBoundsTile(t *testing.T, rng *rand.Rand, n int, zones, specs []string) {
	t.Helper()
	for _, name := range zones {
		loc := zone(t, name)
		for _, s := range specs {
			p := period(t, s, loc)
			for range n {
				at := time.Unix(rng.Int64N(int64(60*365*24*3600))+int64(1980-1970)*365*24*3600, rng.Int64N(1e9))
				start, end := p.Bounds(at)
				if at.Before(start) || !at.Before(end) {
					t.Fatalf("%s in %s: Bounds(%v) = %v – %v does not hold it", s, name, at.In(loc), start.In(loc), end.In(loc))
				}
				if s2, e2 := p.Bounds(start); !s2.Equal(start) || !e2.Equal(end) {
					t.Fatalf("%s in %s: Bounds(its start %v) = %v – %v", s, name, start.In(loc), s2.In(loc), e2.In(loc))
				}
				if s3, _ := p.Bounds(end); !s3.Equal(end) {
					t.Fatalf("%s in %s: the period after %v – %v starts at %v", s, name, start.In(loc), end.In(loc), s3.In(loc))
				}
				if ps, _ := p.Bounds(start.Add(-time.Nanosecond)); !ps.Before(start) {
					t.Fatalf("%s in %s: the period before %v starts at %v", s, name, start.In(loc), ps.In(loc))
				}
			}
		}
	}
}

func TestTokenTime(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 123456000, time.UTC)
	if got := lease.TokenTime(uint64(at.UnixMicro())); !got.Equal(at) {
		t.Errorf("TokenTime = %v, want %v", got, at)
	}
}
