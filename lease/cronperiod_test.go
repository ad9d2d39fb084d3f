package lease_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func TestParseCronPeriod(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	for s, want := range map[string]string{
		"0 21 * * *":        "'0 21 * * *' in Europe/Berlin",
		" 0  21 * *  * ":    "'0 21 * * *' in Europe/Berlin",
		"@daily":            "'@daily' in Europe/Berlin",
		"*/15 9-17 * * 1-5": "'*/15 9-17 * * 1-5' in Europe/Berlin",
	} {
		p := period(t, s, berlin)
		if !p.Calendar() || p.String() != want || p.Location() != berlin {
			t.Errorf("%q: %v (calendar %v), want %s", s, p, p.Calendar(), want)
		}
	}
	for s, says := range map[string]string{
		"0 21 * *":          "expected exactly 5 fields",
		"0 25 * * *":        "above maximum",
		"@every 4h":         "give a duration such as 4h",
		"@fortnightly":      "unrecognized descriptor",
		"0 0 30 2 *":        "never fires",
		"TZ=UTC 0 21 * * *": "--once-per-zone",
		"0 0 21 * * *":      "expected exactly 5 fields",
	} {
		_, err := lease.ParsePeriod(s, berlin)
		if !errors.Is(err, lease.ErrBadPeriod) || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want ErrBadPeriod saying %q", s, err, says)
		}
	}
}

// TestCronPeriodBounds: a period runs from one fire time to the next on
// the zone's wall clock; a fire time the clock skips (spring-forward) fires
// as the clock jumps over it, one it shows twice (fall-back) at its first
// showing only.
func TestCronPeriodBounds(t *testing.T) {
	berlin, kathmandu := zone(t, "Europe/Berlin"), zone(t, "Asia/Kathmandu")
	at := func(loc *time.Location, s string) time.Time { return wallTime(t, loc, s) }
	utc := func(s string) time.Time { return at(time.UTC, s+" +0000") }
	checkBounds(t, []boundsCase{
		{"the 21:00 backup, before 21:00", "0 21 * * *", nil, utc("2026-11-25 20:59:59"), utc("2026-11-24 21:00:00"), utc("2026-11-25 21:00:00")},
		{"the 21:00 backup, at 21:00", "0 21 * * *", nil, utc("2026-11-25 21:00:00"), utc("2026-11-25 21:00:00"), utc("2026-11-26 21:00:00")},
		{"in Berlin", "0 21 * * *", berlin, utc("2026-11-25 20:30:00"), utc("2026-11-25 20:00:00"), utc("2026-11-26 20:00:00")},
		{"at +05:45", "0 * * * *", kathmandu, utc("2026-11-25 10:00:00"), utc("2026-11-25 09:15:00"), utc("2026-11-25 10:15:00")},
		{"weekdays only: Friday's lasts the weekend", "0 9 * * 1-5", nil, utc("2026-11-29 12:00:00"), utc("2026-11-27 09:00:00"), utc("2026-11-30 09:00:00")},
		{"@monthly", "@monthly", nil, utc("2026-02-28 23:59:59"), utc("2026-02-01 00:00:00"), utc("2026-03-01 00:00:00")},
		{"every 15 minutes in office hours", "*/15 9-17 * * *", nil, utc("2026-11-25 17:50:00"), utc("2026-11-25 17:45:00"), utc("2026-11-26 09:00:00")},
		{"leap day", "0 0 29 2 *", nil, utc("2026-11-25 00:00:00"), utc("2024-02-29 00:00:00"), utc("2028-02-29 00:00:00")},
		// Spring-forward in Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST.
		{"a skipped 02:30 fires at 03:00", "30 2 * * *", berlin, at(berlin, "2026-03-29 12:00:00 +0200"), at(berlin, "2026-03-29 03:00:00 +0200"), at(berlin, "2026-03-30 02:30:00 +0200")},
		{"the day before it ends then", "30 2 * * *", berlin, at(berlin, "2026-03-29 01:59:59 +0100"), at(berlin, "2026-03-28 02:30:00 +0100"), at(berlin, "2026-03-29 03:00:00 +0200")},
		{"every 10 minutes of the skipped hour: one fire time at 03:00", "*/10 2 * * *", berlin, at(berlin, "2026-03-29 03:05:00 +0200"), at(berlin, "2026-03-29 03:00:00 +0200"), at(berlin, "2026-03-30 02:00:00 +0200")},
		{"hourly over the jump", "0 * * * *", berlin, at(berlin, "2026-03-29 01:30:00 +0100"), at(berlin, "2026-03-29 01:00:00 +0100"), at(berlin, "2026-03-29 03:00:00 +0200")},
		// Fall-back in Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET.
		{"a repeated 02:30 fires at its first showing", "30 2 * * *", berlin, at(berlin, "2026-10-25 02:45:00 +0200"), at(berlin, "2026-10-25 02:30:00 +0200"), at(berlin, "2026-10-26 02:30:00 +0100")},
		{"not again at its second", "30 2 * * *", berlin, at(berlin, "2026-10-25 02:45:00 +0100"), at(berlin, "2026-10-25 02:30:00 +0200"), at(berlin, "2026-10-26 02:30:00 +0100")},
		{"hourly: the repeated hour's period lasts two", "0 * * * *", berlin, at(berlin, "2026-10-25 02:30:00 +0100"), at(berlin, "2026-10-25 02:00:00 +0200"), at(berlin, "2026-10-25 03:00:00 +0100")},
		{"a daily 21:00 over the fall-back: 25 hours", "0 21 * * *", berlin, at(berlin, "2026-10-25 12:00:00 +0100"), at(berlin, "2026-10-24 21:00:00 +0200"), at(berlin, "2026-10-25 21:00:00 +0100")},
	})
}

// TestCronPeriodBoundsTile: as TestPeriodBoundsTile, for schedules, in
// zones with clock changes of an hour, half an hour and a whole day.
func TestCronPeriodBoundsTile(t *testing.T) {
	checkBoundsTile(t, rand.New(rand.NewPCG(3, 4)), 200,
		[]string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo", "America/Havana", "Pacific/Apia", "Pacific/Chatham"},
		[]string{"0 21 * * *", "30 2 * * *", "*/7 * * * *", "0 0 * * 0", "@monthly", "15 1-3 * * 1-5"})
}

// BenchmarkCronPeriodBounds: what a --once-per run with a schedule spends
// finding its period (once per run).
func BenchmarkCronPeriodBounds(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []string{"0 21 * * *", "* * * * *", "0 0 1 1 *"} {
		p, err := lease.ParsePeriod(s, loc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s, func(b *testing.B) {
			at := time.Date(2026, 10, 25, 2, 30, 0, 0, loc)
			for b.Loop() {
				p.Bounds(at)
			}
		})
	}
}
