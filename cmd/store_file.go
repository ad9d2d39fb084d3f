package cmd

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

// openFileStore opens file:///abs/dir.
func openFileStore(_ context.Context, raw string, _ lease.OpenOptions) (lease.Store, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Host != "" && u.Host != "localhost") || u.User != nil || u.Path == "" || u.RawQuery != "" || u.ForceQuery {
		return nil, lease.NewError(fmt.Sprintf("--store %q is not a file store URL: want file:///absolute/directory", redactURL(raw)), lease.ErrConfig)
	}
	// A '#' would otherwise cut the path silently: file:///locks#2 is not
	// the directory /locks.
	if strings.Contains(raw, "#") {
		return nil, lease.NewError(fmt.Sprintf("--store %q: a file store URL cannot have a #fragment (write %%23 for a '#' in the directory name)", redactURL(raw)), lease.ErrConfig)
	}
	return filelease.Open(u.Path)
}

// openStoreFor opens --store, or the per-user file store when it is empty.
func openStoreFor(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error) {
	if raw == "" {
		dir, err := filelease.DefaultDir()
		if err != nil {
			return nil, err
		}
		return filelease.Open(dir)
	}
	return openStore(ctx, raw, o)
}
