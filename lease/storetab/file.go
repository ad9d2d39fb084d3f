package storetab

import "time"

// file is the file store: a lock file per lease, held by flock(2).
var file = Row{
	Name:    "file",
	Schemes: []string{"file"},
	Form:    "file:///dir",
	Local:   true,
	Program: Leaderrun,
	Package: "github.com/leaderrun/leaderrun/lease/filelease",
	Watches: true,
	Step:    100 * time.Millisecond,
}
