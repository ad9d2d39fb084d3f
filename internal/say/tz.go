package say

import (
	"strconv"
	"strings"
	"time"
)

// posixZone returns the zone of a POSIX TZ value without daylight saving
// time ("UTC+3", "EST5", "<+0530>-5:30"), which Go's time package does not
// read (it loads TZ as a zoneinfo name, and falls back to UTC), or nil when
// tz is not of that form. A POSIX offset counts hours west of Greenwich:
// UTC+3 is three hours behind UTC, as date(1) shows it.
func posixZone(tz string) *time.Location {
	name, rest := "", tz
	if strings.HasPrefix(rest, "<") {
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return nil
		}
		name, rest = rest[1:end], rest[end+1:]
	} else {
		i := 0
		for i < len(rest) && (rest[i] >= 'A' && rest[i] <= 'Z' || rest[i] >= 'a' && rest[i] <= 'z') {
			i++
		}
		name, rest = rest[:i], rest[i:]
	}
	if len(name) < 3 || rest == "" {
		return nil
	}
	sign := 1
	switch rest[0] {
	case '-':
		sign, rest = -1, rest[1:]
	case '+':
		rest = rest[1:]
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return nil
	}
	secs := 0
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || len(p) > 2 || i > 0 && n > 59 || i == 0 && n > 24 {
			return nil // not a plain offset: a DST part or a rule follows
		}
		secs += n * []int{3600, 60, 1}[i]
	}
	return time.FixedZone(name, -sign*secs)
}

// UseTZ makes time.Local follow a POSIX TZ value that Go cannot load.
func UseTZ(getenv func(string) string) {
	if loc := posixZone(getenv("TZ")); loc != nil {
		time.Local = loc
	}
}
