// Command leaderrun-etcd is leaderrun with the etcd store linked in
// (etcd:// and etcds://). leaderrun runs it in its own place when --store
// names one of those schemes, so that a file-store run never pays for the
// etcd client (gRPC); it takes exactly leaderrun's arguments. See the
// README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
)

func main() {
	store := cmd.Link(etcdlease.Schemes, etcdlease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
