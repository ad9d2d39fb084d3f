package cmd

import (
	"github.com/leaderrun/leaderrun/lease/bloblease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	"github.com/leaderrun/leaderrun/lease/pglease"
	"github.com/leaderrun/leaderrun/lease/redislease"
)

// The tests of this package link every store, as the leaderrun-* programs
// do one each (cmd/leaderrun-*/main.go); TestDrivers checks that the
// dispatch table names the right program for each.
func init() {
	register([]LinkedStore{
		Link(redislease.Schemes, redislease.Open),
		Link(bloblease.Schemes(), bloblease.Open),
		Link(etcdlease.Schemes, etcdlease.Open),
		Link(pglease.Schemes, pglease.Open),
	})
}
