package cmd

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/lease"
)

// TestOncePerSaysTodaysTimes: the line that finds the period done says a
// time on today's date as every other line does, the time of day alone
// ("started 06:13:20 UTC", "since 05:13:20 UTC", "this hour (06:00 to
// 07:00 UTC"), and a date only for another day.
func TestOncePerSaysTodaysTimes(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"LEADERRUN_STORE": "file://" + dir}
	for i, period := range [][]string{{"--once-per", "hour"}, {"--once-within", "1h"}, {"--once-per", "day"}} {
		name := fmt.Sprintf("words%d", i)
		args := append(append([]string{"--name", name}, period...), "--", "true")
		if code, _, errOut := runEnv(t, vars, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", period, code, errOut)
		}
		code, _, errOut := runEnv(t, vars, args...)
		now := time.Now().UTC()
		runs := runsOf(t, dir, name)
		if code != 0 || len(runs) != 1 || !strings.Contains(errOut, "already done") {
			t.Fatalf("%v, second run: exit %d, %d runs recorded: %s; want 0, one run, already done", period, code, len(runs), errOut)
		}
		start := runs[0].Start
		want := []string{"started " + say.TimeZone(start, now) + ","}
		switch period[1] {
		case "1h":
			// The window began an hour before the second acquisition.
			if since := now.Add(-time.Hour - time.Minute); say.SameDay(since, now) && !regexp.MustCompile(`\(since \d\d:\d\d:\d\d UTC,`).MatchString(errOut) {
				t.Errorf("%v: %q does not say since when as a time of day", period, errOut)
			}
		case "hour":
			p, _ := lease.ParsePeriod("hour", time.UTC)
			s, e := p.Bounds(start)
			layout := "2006-01-02 15:04"
			if say.SameDay(s, e) && say.SameDay(s, now) {
				layout = "15:04"
			}
			want = append(want, "this hour ("+s.Format(layout)+" to "+e.Format(layout)+" UTC,")
		}
		for _, w := range want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: %q does not say %q", period, errOut, w)
			}
		}
		if say.SameDay(start, now) && strings.Contains(errOut, "started "+start.UTC().Format(time.DateOnly)) {
			t.Errorf("%v: %q gives today's date", period, errOut)
		}
	}
}
