package cmd

import "time"

// FormatTime formats t for a message read at now, in now's location: the
// time of day alone ("15:04:05") when t falls on now's date, with the date
// ("2006-01-02 15:04:05") otherwise, so a line read tomorrow or from an old
// log is not mistaken for today's.
func FormatTime(t, now time.Time) string {
	t = t.In(now.Location())
	if sameDay(t, now) {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}

// FormatTimeZone is FormatTime with the zone appended ("15:04:05 CET"),
// for output read on another host, such as status.
func FormatTimeZone(t, now time.Time) string {
	return FormatTime(t, now) + " " + t.In(now.Location()).Format("MST")
}

func sameDay(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd
}
