package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/bloblease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	"github.com/leaderrun/leaderrun/lease/pglease"
	"github.com/leaderrun/leaderrun/lease/redislease"
)

// The tests of this package link every store, as the leaderrun-* programs
// do one each (cmd/leaderrun-*/main.go); TestDrivers checks that the
// dispatch table names the right program for each.
func init() {
	register([]LinkedStore{
		{Schemes: redislease.Schemes, Open: func(ctx context.Context, raw string, o StoreOptions) (lease.Store, error) {
			s, err := redislease.Open(ctx, raw, redislease.Options{CallTimeout: o.CallTimeout, Getenv: o.Getenv, Log: o.Log})
			if err != nil {
				return nil, err
			}
			return s, nil
		}},
		{Schemes: bloblease.Schemes(), Open: func(ctx context.Context, raw string, o StoreOptions) (lease.Store, error) {
			s, err := bloblease.Open(ctx, raw, bloblease.Options{CallTimeout: o.CallTimeout, Getenv: o.Getenv, Log: o.Log})
			if err != nil {
				return nil, err
			}
			return s, nil
		}},
		{Schemes: etcdlease.Schemes, Open: func(ctx context.Context, raw string, o StoreOptions) (lease.Store, error) {
			s, err := etcdlease.Open(ctx, raw, etcdlease.Options{CallTimeout: o.CallTimeout, Getenv: o.Getenv, Log: o.Log})
			if err != nil {
				return nil, err
			}
			return s, nil
		}},
		{Schemes: pglease.Schemes, Open: func(ctx context.Context, raw string, o StoreOptions) (lease.Store, error) {
			s, err := pglease.Open(ctx, raw, pglease.Options{CallTimeout: o.CallTimeout, Getenv: o.Getenv, Log: o.Log})
			if err != nil {
				return nil, err
			}
			return s, nil
		}},
	})
}
