// Command leaderrun-redis is leaderrun with the Redis store linked in
// (redis://, rediss://, unix://, redis+sentinel://, redis+cluster:// and
// their TLS forms). leaderrun runs it in its own place when --store names
// one of those schemes, so that a file-store run never pays for the Redis
// client; it takes exactly leaderrun's arguments. See the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/redislease"
)

func main() {
	store := cmd.Link(redislease.Schemes, redislease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
