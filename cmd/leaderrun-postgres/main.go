// Command leaderrun-postgres is leaderrun with the PostgreSQL store linked in
// (postgres:// and postgresql:// URLs). leaderrun runs it in its own place
// when --store names one of those schemes, so that a file-store run never
// pays for the PostgreSQL client; it takes exactly leaderrun's arguments.
// See the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/pglease"
)

func main() {
	store := cmd.Link(pglease.Schemes, pglease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
