// Command leaderrun-mysql is leaderrun with the MySQL/MariaDB store linked
// in (mysql:// and mariadb:// URLs). leaderrun runs it in its own place
// when --store names one of those schemes, so that a file-store run never
// pays for the MySQL client; it takes exactly leaderrun's arguments. See
// the README.
package main

import (
	"context"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/lease/mysqllease"
)

func main() {
	store := cmd.Link(mysqllease.Schemes, mysqllease.Open)
	os.Exit(cmd.Main(context.Background(), os.Args, os.Environ(), cmd.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, store))
}
