package mysqllease

import "github.com/leaderrun/leaderrun/lease"

var _ lease.ClockTokens = (*Store)(nil)

// TokensCountClock marks this store's tokens as clock readings: each is at
// least the server's clock in microseconds when it was minted (see
// lease.ClockTokens).
func (*Store) TokensCountClock() {}

// Slots (lease.Request.Slots above 1). Each slot of lease NAME is a lease of
// its own, a row of the leases table: slot 0 is NAME's row itself, slot k
// the row NAME~k ('~' is in no lease name). Every acquisition of any slot
// of NAME first bumps NAME's counter row (NAME~) in the same statement, so
// the tokens of all slots come from one counter, minted in the order the
// acquisitions commit.
