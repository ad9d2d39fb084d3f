// Package storeopt holds the option handling the network stores
// (redislease, etcdlease, pglease) share: the zero values of their Options
// fields and the rounding of a lease TTL to the milliseconds a server
// stores. Each store keeps its own exported Options type, documented with
// what its fields mean there.
package storeopt

import (
	"log/slog"
	"math"
	"os"
	"time"
)

// Defaults returns callTimeout, getenv and log with their zero values
// replaced: a callTimeout of zero or less by def, a nil getenv by
// os.Getenv, a nil log by one that discards.
func Defaults(callTimeout, def time.Duration, getenv func(string) string, log *slog.Logger) (time.Duration, func(string) string, *slog.Logger) {
	if callTimeout <= 0 {
		callTimeout = def
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return callTimeout, getenv, log
}

// Millis is d in whole milliseconds, rounded up, so that a store never
// grants less than asked.
func Millis(d time.Duration) int64 {
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}
