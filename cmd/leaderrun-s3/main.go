// Command leaderrun-s3 is leaderrun with the S3 store linked in (s3://
// URLs). leaderrun runs it in its own place when --store names that
// scheme, so that a file-store run never pays for the AWS SDK; it takes
// exactly leaderrun's arguments. See the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/s3lease"
)

func main() {
	store := cmd.Link(s3lease.Schemes, s3lease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
