// Command libfloor is the design floor (package floor) built the way
// leaderrun must be built: its command line read by urfave/cli, with
// fatih/color and log/slog linked for its messages, and the nine signals a
// run forwards or must survive caught where leaderrun catches them, seven
// before the child starts and two once it has (os/signal is the only way
// a Go program catches a signal, each a round trip to the runtime's
// signal-mask thread). scripts/bench.sh measures leaderrun
// against it: `libfloor --version` is the least a program with these
// libraries pays to print its version, `libfloor FILE COMMAND` the least a
// file run pays. What leaderrun adds to it is leaderrun's own code.
//
// With --no-signals it catches none, which tells the libraries' share from
// the signals'.
//
//	libfloor --version
//	libfloor [--no-signals] FILE COMMAND [ARGS...]
package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/fatih/color"
	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/scripts/startcost/internal/floor"
)

func main() {
	if floor.IsGuard(os.Args) {
		floor.Guard()
		return
	}
	app := &cli.App{
		Name:    "libfloor",
		Version: "dev",
		Flags:   []cli.Flag{&cli.BoolFlag{Name: "no-signals", Usage: "catch no signal"}},
		Action: func(c *cli.Context) error {
			if c.NArg() < 2 {
				return cli.Exit(color.RedString("libfloor [--no-signals] FILE COMMAND [ARGS...]"), 125)
			}
			slog.Debug("run", "file", c.Args().First())
			h := floor.Hooks{AfterGuard: catchSignals, AfterChild: catchChildSignals}
			if c.Bool("no-signals") {
				h = floor.Hooks{}
			}
			floor.Run(c.Args().First(), c.Args().Tail(), h)
			return nil
		},
	}
	if err := app.Run(os.Args); err != nil {
		os.Exit(125)
	}
}

// signals receives what is caught; nobody reads it.
var signals = make(chan os.Signal, 16)

// catchSignals catches what leaderrun catches before its child starts: the
// six signals it forwards whose default would end it, and PIPE (so that a
// closed stderr cannot kill it). Like leaderrun, it does so once the guard
// has been forked, overlapping the guard's start.
func catchSignals() {
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
}

// catchChildSignals catches what leaderrun catches once its child has
// started: WINCH, which it forwards, and CONT (job control), whose default
// actions are none.
func catchChildSignals() { signal.Notify(signals, syscall.SIGWINCH, syscall.SIGCONT) }
