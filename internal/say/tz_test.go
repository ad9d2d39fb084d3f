package say

import (
	"testing"
	"time"
)

// POSIX TZ values without daylight saving time, which Go does not read, are
// followed as date(1) follows them; anything else is left to Go.
func TestPosixZone(t *testing.T) {
	for tz, want := range map[string]int{"UTC+3": -3 * 3600, "EST5": -5 * 3600, "<+0530>-5:30": 5*3600 + 30*60, "JST-9": 9 * 3600, "ABC+1:02:03": -(3600 + 2*60 + 3)} {
		loc := posixZone(tz)
		if loc == nil {
			t.Errorf("posixZone(%q) = nil", tz)
			continue
		}
		if _, off := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Zone(); off != want {
			t.Errorf("posixZone(%q): offset %d; want %d", tz, off, want)
		}
	}
	for _, tz := range []string{"", "UTC", "Europe/Berlin", "EST5EDT", "EST5EDT,M3.2.0,M11.1.0", "CET-1CEST", "X+1", "UTC+99", "<+03", ":UTC"} {
		if loc := posixZone(tz); loc != nil {
			t.Errorf("posixZone(%q) = %v; want nil (Go's own)", tz, loc)
		}
	}
}
