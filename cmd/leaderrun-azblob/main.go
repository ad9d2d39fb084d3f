// Command leaderrun-azblob is leaderrun with the Azure Blob Storage store
// linked in (azblob://, azblob+https://, azblob+http://). leaderrun runs it
// in its own place when --store names one of those schemes, so that other
// runs never pay for the Azure SDK; it takes exactly leaderrun's arguments.
// See the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/bloblease"
)

func main() {
	store := cmd.Link(bloblease.Schemes(), bloblease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
