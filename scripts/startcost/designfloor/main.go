// Command designfloor is the floor of leaderrun's design on the file store,
// which scripts/bench.sh measures leaderrun against beside the floor of a
// plain Go wrapper: every step a file run's promises need, each done the
// cheapest way Go allows, and nothing else (the steps are package floor's
// comment). libfloor is the same floor with what leaderrun is built with.
//
//	designfloor FILE COMMAND [ARGS...]
package main

import (
	"os"

	"github.com/leaderrun/leaderrun/scripts/startcost/internal/floor"
)

func main() {
	if floor.IsGuard(os.Args) {
		floor.Guard()
		return
	}
	floor.Run(os.Args[1], os.Args[2:], floor.Hooks{})
}
