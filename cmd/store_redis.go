package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/redislease"
)

// Redis stores: redis://, rediss://, unix://, redis+sentinel://,
// rediss+sentinel://, redis+cluster://, rediss+cluster:// (redislease.Schemes).
func init() {
	for _, scheme := range redislease.Schemes {
		storeOpeners[scheme] = openRedisStore
	}
}

func openRedisStore(ctx context.Context, raw string, o storeOptions) (lease.Store, error) {
	s, err := redislease.Open(ctx, raw, redislease.Options{
		CallTimeout: o.CallTimeout,
		Getenv:      o.Getenv,
		Log:         o.Log,
	})
	if err != nil {
		return nil, err // redislease errors never contain the password
	}
	return s, nil
}
