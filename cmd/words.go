package cmd

import (
	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/internal/say"
)

// How the read-only commands word things, shared with the run (internal/say).
var (
	heldBy         = say.HeldBy
	holderName     = say.HolderName
	printable      = say.Printable
	humanDuration  = say.Duration
	sameDay        = say.SameDay
	FormatTime     = say.Time
	FormatTimeZone = say.TimeZone
	holdText       = say.HoldText
)

// Variables the run gives its child, and --store's, which the variable
// checks (suggest.go) know.
const (
	envLease           = run.EnvLease
	envLeaseHolder     = run.EnvLeaseHolder
	envLeaseToken      = run.EnvLeaseToken
	envTokenDeprecated = run.EnvTokenDeprecated
	storeVar           = run.StoreVar
)
