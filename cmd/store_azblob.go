package cmd

import (
	"context"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/bloblease"
)

// init registers the Azure Blob store for azblob://, azblob+https:// and
// azblob+http:// URLs (forms and credentials: bloblease package doc).
func init() {
	for _, scheme := range bloblease.Schemes() {
		storeOpeners[scheme] = openAzblob
	}
}

func openAzblob(ctx context.Context, raw string, o storeOptions) (lease.Store, error) {
	s, err := bloblease.Open(ctx, raw, bloblease.Options{
		CallTimeout: o.CallTimeout,
		Getenv:      o.Getenv,
		Log:         o.Log,
	})
	if err != nil {
		return nil, err // not s: a nil *Store in a lease.Store is not nil
	}
	return s, nil
}
