// Command leaderrun runs a command under a distributed lease, so that of many
// hosts or jobs exactly one runs it at a time. See the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
)

func main() {
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
