package cmd

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/lease"
)

// options holds the value of every flag of every form: each flag is bound
// to its field once (urfave's Destination, in commands.go), and a form's
// action reads the fields, never a flag by its name. Only the fields of
// the form that runs are set. The zero value is no flag given; the
// defaults are the flags' Value.
type options struct {
	// Every form (commonFlags).
	store, logFormat string
	quiet, verbose   bool

	// The run form (runFlags, monitorFlags): the flags whose value is the
	// run's as it is are bound to run's fields; runConfig reads the others
	// (text that means a duration, a signal, a period, …) into it.
	run                       run.Config
	wait, stopSignal, contain string
	oncePer, oncePerZone      string
	ping, pingFormat          string
	listen, podLabel          string
	noWait                    bool
	passEnv                   cli.StringSlice

	// The subcommands.
	json, once, succeeded      bool
	interval, since, ranWithin time.Duration
	format                     string
	limit                      int

	// given holds the Destination of each flag given, on the command line
	// or by its variable (applyEnv).
	given map[any]bool
	// fromVar holds, by flag name, the variable of each flag whose value
	// came from it (applyEnv): messages name what the user set (spell).
	fromVar map[string]string
}

// spell names the flag called name in a message as the user gave it, with
// its value as the message shows it when shown is not "": "--ttl 0s", or
// for a value read from the flag's variable "LEADERRUN_TTL=0s (--ttl)".
// Every message that refuses a flag's value names the flag through it, so
// that LEADERRUN_PING=bad is not reported as --ping. It is a
// lease.FlagSpeller.
func (o *options) spell(name, shown string) string {
	v := o.fromVar[name]
	switch {
	case v == "":
		return lease.DashFlag(name, shown)
	case shown == "":
		return v + " (" + dashes(name) + ")"
	}
	return v + "=" + shown + " (" + dashes(name) + ")"
}

// flag is spell without the value: "--ping" or "LEADERRUN_PING (--ping)".
func (o *options) flag(name string) string { return o.spell(name, "") }

// isGiven reports whether the flag bound to dest (a field of o) was given,
// on the command line or by its variable, rather than left at its default.
func (o *options) isGiven(dest any) bool { return o.given[dest] }
