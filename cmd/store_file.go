package cmd

import (
	"context"
	"fmt"
	"net/url"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

func init() { storeOpeners["file"] = openFileStore }

// openFileStore opens file:///abs/dir.
func openFileStore(_ context.Context, raw string, _ storeOptions) (lease.Store, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Host != "" && u.Host != "localhost") || u.Path == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("%w: --store %q: want file:///absolute/directory", lease.ErrConfig, redactURL(raw))
	}
	return filelease.Open(u.Path)
}

// openStoreFor opens --store, or the per-user file store when it is empty.
func openStoreFor(ctx context.Context, raw string, o storeOptions) (lease.Store, error) {
	if raw == "" {
		dir, err := filelease.DefaultDir()
		if err != nil {
			return nil, err
		}
		return filelease.Open(dir)
	}
	return openStore(ctx, raw, o)
}
