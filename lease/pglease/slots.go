package pglease

import "github.com/leaderrun/leaderrun/lease"

// Slots (lease.Request.Slots above 1). Each slot of lease NAME is a lease of
// its own, a row of the leases table: slot 0 is NAME's row itself, slot k
// the row NAME~k ('~' is in no lease name). Tokens come from the one
// sequence every lease draws from, and an acquisition of any slot of NAME
// takes NAME's advisory lock, so it mints only after every earlier
// acquisition of a slot of NAME has committed: greatest(nextval, server
// clock) then strictly increases across the slots, as it does across the
// acquisitions of one lease. A lease taken without slots takes the lock it
// always did.

// tokenDomain is the lease whose advisory lock an acquisition of name
// takes: the lease itself, for a slot the lease it is a slot of.
func tokenDomain(name string) string {
	base, _, _ := lease.ParseSlotName(name)
	return base
}
