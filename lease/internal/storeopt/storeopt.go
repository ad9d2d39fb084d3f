// Package storeopt holds the option and request handling the network
// stores (redislease, etcdlease, pglease, bloblease) share: the zero values
// of their Options (lease.OpenOptions) fields, the rounding of a lease TTL to
// the milliseconds a server stores, the checks that head TryAcquire, and
// the shape of a release with a hold.
package storeopt

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
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

// ErrNoID is returned for a request without an acquisition ID: with none,
// two callers could each take the other's lease for their own retry.
var ErrNoID = errors.New("acquire with an empty acquisition ID (a bug in the caller)")

// CheckRequest refuses a request that the store's TryAcquire must never send:
// one without an ID (ErrNoID), or one whose TTL is below minTTL (store names
// the store in the message).
func CheckRequest(id string, ttl time.Duration, store string, minTTL time.Duration) error {
	if id == "" {
		return ErrNoID
	}
	if ttl < minTTL {
		return storeerr.Config("the %s lease TTL %v is below the minimum %v", store, ttl, minTTL)
	}
	return nil
}

// ReleaseHeld is the shape of a network store's lease.Holding: a hold that
// is not positive releases at once (release); a positive one is kept by the
// store's own keep.
func ReleaseHeld(ctx context.Context, hold time.Duration, release func(context.Context) error, keep func(context.Context, time.Duration) error) error {
	if hold <= 0 {
		return release(ctx)
	}
	return keep(ctx, hold)
}
