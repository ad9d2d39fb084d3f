package bloblease

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/leaderrun/leaderrun/lease"
)

// Wait polls the blob's lease state every poll interval plus jitter and
// returns nil once it looks available, expired or broken (or the blob is
// gone), or after a failed poll (so TryAcquire reports the failure); it
// returns ctx's error when ctx is done.
func (s *Store) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	bc := s.blob(name)
	for {
		// ±25% around the interval: the mean stays the configured poll, so a
		// clean handover takes about one poll, not one and a half.
		t := time.NewTimer(s.poll*3/4 + rand.N(s.poll/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) { return bc.GetProperties(ctx, nil) })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || free(props.LeaseState) {
			return nil
		}
		if _, isHold, ended := longHold(props); isHold && ended {
			return nil // TryAcquire ends the hold
		}
	}
}
