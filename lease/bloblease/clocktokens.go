package bloblease

import "github.com/leaderrun/leaderrun/lease"

var _ lease.ClockTokens = (*Store)(nil)

// TokensCountClock marks this store's tokens as clock readings: each is at
// least the response's Date in microseconds when it was minted (see lease.ClockTokens).
func (*Store) TokensCountClock() {}
