// Command leaderrun-gcs is leaderrun with the Google Cloud Storage store
// linked in (gs:// URLs). leaderrun runs it in its own place when --store
// names that scheme, so that a file-store run never pays for Google's
// client; it takes exactly leaderrun's arguments. See the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/gcslease"
)

func main() {
	store := cmd.Link(gcslease.Schemes, gcslease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
