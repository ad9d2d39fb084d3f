// Command leaderrun-kubernetes is leaderrun with the Kubernetes store
// linked in (kubernetes://). leaderrun runs it in its own place when
// --store names that scheme, so that no other run pays for client-go; it
// takes exactly leaderrun's arguments. See the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/kubelease"
)

func main() {
	store := cmd.Link(kubelease.Schemes, kubelease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
