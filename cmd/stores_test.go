package cmd

import (
	"github.com/leaderrun/leaderrun/lease/bloblease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	"github.com/leaderrun/leaderrun/lease/gcslease"
	"github.com/leaderrun/leaderrun/lease/kubelease"
	"github.com/leaderrun/leaderrun/lease/mysqllease"
	"github.com/leaderrun/leaderrun/lease/pglease"
	"github.com/leaderrun/leaderrun/lease/redislease"
	"github.com/leaderrun/leaderrun/lease/s3lease"
)

// The tests of this package link every store, as the leaderrun-* programs
// do one each (cmd/leaderrun-*/main.go); TestDrivers checks that every
// scheme of the store table is linked here.
func init() {
	register([]LinkedStore{
		Link(redislease.Schemes, redislease.Open),
		Link(bloblease.Schemes(), bloblease.Open),
		Link(etcdlease.Schemes, etcdlease.Open),
		Link(pglease.Schemes, pglease.Open),
		Link(kubelease.Schemes, kubelease.Open),
		Link(mysqllease.Schemes, mysqllease.Open),
		Link(s3lease.Schemes, s3lease.Open),
		Link(gcslease.Schemes, gcslease.Open),
	})
}
