package say

import (
	"fmt"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Time formats t for a message read at now, in now's location: the time of
// day alone ("15:04:05") when t falls on now's date, with the date
// ("2006-01-02 15:04:05") otherwise, so a line read tomorrow or from an old
// log is not mistaken for today's.
func Time(t, now time.Time) string {
	t = t.In(now.Location())
	if SameDay(t, now) {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}

// TimeZone is Time with the zone appended ("15:04:05 CET"), for output
// read on another host, such as status.
func TimeZone(t, now time.Time) string {
	return Time(t, now) + " " + t.In(now.Location()).Format("MST")
}

// SameDay reports whether a and b fall on the same date.
func SameDay(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd
}

// Duration rounds d for a message: whole seconds from a minute up, tenths
// of a second below, milliseconds below a second.
func Duration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		s := d.Round(time.Second).String() // "10m0s" → "10m", "1h0m0s" → "1h"
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// HeldBy describes a holder: "held by web-1:42 since 14:03:07, token 7".
func HeldBy(h lease.Holder, now time.Time) string {
	s := "held by " + HolderName(h.Label)
	if !h.Since.IsZero() {
		s += " since " + TimeZone(h.Since, now)
	}
	if h.Token != 0 {
		s += fmt.Sprintf(", token %d", h.Token)
	}
	if !h.HeldUntil.IsZero() {
		s += ", finished and kept taken until " + TimeZone(h.HeldUntil, now) + " by --hold-at-least"
		if now.After(h.HeldUntil) {
			// etcd frees a key some time after its lease ran out.
			s += " (over; the store has yet to free it)"
		}
	}
	return s
}

// HoldText describes a hold for status: the holder has finished and the
// lease stays taken until until.
func HoldText(until, now time.Time) string {
	if !now.Before(until) {
		return "; finished, kept taken until " + TimeZone(until, now) + " by --hold-at-least (over; the store has yet to free it)"
	}
	return fmt.Sprintf("; finished, kept taken until %s (in %v) by --hold-at-least", TimeZone(until, now), until.Sub(now).Round(100*time.Millisecond))
}
