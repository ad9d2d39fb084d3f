//go:build !leaderrun_clockskew

// Package wallclock is this host's wall clock where leaderrun stamps an
// instant that other hosts read as a date: the start a store records for a
// holder (Holder.Since on Redis, etcd and Azure), a run's start and end in
// the history, and the acquisition --once-per decides its period on where
// the store's tokens count no clock (etcd, Kubernetes). Deadlines never
// read it: they run on internal/boottime.
//
// In every build but the e2e tests' clock-skew build (tag
// leaderrun_clockskew, skew.go) Now is time.Now.
package wallclock

import "time"

// Now returns this host's wall-clock time.
func Now() time.Time { return time.Now() }
