// Package room holds the rule by which the SQL stores' waiting instances
// keep a connection of their own to the server (pglease: the LISTEN
// connection; mysqllease: the polling front's query connection) only while
// the server keeps room for the application (docs/stores.md): a fleet of
// standbys must never take the server's last connections.
//
// A connection is made, or kept, only while a quarter of each connection
// limit (3 at least) stays free (Check, Headroom); the room is read again
// every Every while the connection is kept, and it is let go under half of
// that. A server that refuses a connection as too many is back-pressure:
// no such connection for a jittered, growing pause (Pressure). Each store
// reads its server's limits and counts its connections itself.
package room

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Every is how often a kept connection's room is read again.
const Every = 15 * time.Second

// minPressure and maxPressure bound the back-pressure pause (doubling,
// jittered).
const (
	minPressure = 5 * time.Second
	maxPressure = 60 * time.Second
)

// Headroom is how many of limit connections a connection leaves free to be
// made or kept: a quarter, at least 3; half of that to keep one already
// made (staying).
func Headroom(limit int64, staying bool) int64 {
	h := max(3, limit/4)
	if staying {
		h = max(1, h/2)
	}
	return h
}

// Limit is one connection limit (of the server, a user or role, a
// database) and how many connections count against it now. A negative Max
// is no limit.
type Limit struct{ Max, Used int64 }

// Check returns an error wrapping noRoom, with the numbers, when extra more
// connections would leave fewer than Headroom(Max, staying) of a limit
// free; nil when every limit keeps room.
func Check(noRoom error, extra int64, staying bool, limits ...Limit) error {
	for _, lim := range limits {
		if lim.Max < 0 {
			continue
		}
		if free, want := lim.Max-lim.Used-extra, Headroom(lim.Max, staying); free < want {
			return fmt.Errorf("%w (%d of %d free, want %d)", noRoom, max(free, 0), lim.Max, want)
		}
	}
	return nil
}

// Pressure is the back-pressure pause after the server refused a
// connection as too many (or had no room): from 5 s, doubling up to 60 s,
// jittered so that a fleet does not come back at once. The zero value has
// no pause yet. It is not safe for concurrent use.
type Pressure struct{ d time.Duration }

// Next grows the pause and returns how long to wait: between half of it
// and all of it.
func (p *Pressure) Next() time.Duration {
	p.d = min(max(2*p.d, minPressure), maxPressure)
	return p.d/2 + rand.N(p.d/2+1)
}

// Reset forgets the pause: the server had room again.
func (p *Pressure) Reset() { p.d = 0 }
