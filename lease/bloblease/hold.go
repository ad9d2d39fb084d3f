package bloblease

import (
	"context"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
)

// endedHold is what ending a long hold needs: the ETag of the read that
// found it ended and the hold's lease ID (empty if the metadata lacks it).
type endedHold struct {
	etag    *azcore.ETag
	leaseID string
}

// held builds the HeldError, with the holder read from metadata when
// possible. ended is set when the properties show a long hold
// (ReleaseHeld) that has ended, nil otherwise.
func (s *Store) held(ctx context.Context, name string, bc *blockblob.Client) (he *lease.HeldError, ended *endedHold) {
	he = &lease.HeldError{By: lease.Holder{Name: name}}
	props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) { return bc.GetProperties(ctx, nil) })
	if err != nil {
		s.log.Debug("azblob: reading the holder record", "name", name, "err", s.classify(ctx, "read holder", err, nil))
		return he, nil
	}
	he.By = holderFrom(name, props.Metadata)
	if _, isHold, done := longHold(props); isHold && done {
		id, _ := metaGet(props.Metadata, metaHoldLease)
		return he, &endedHold{etag: props.ETag, leaseID: id}
	}
	return he, nil
}

// longHold reports whether props show a long hold: an infinite lease (no
// holder of leaderrun ever takes one) whose metadata names the hold's end;
// ended says that end has passed by the service's clock (the response's
// Date).
func longHold(props blob.GetPropertiesResponse) (until time.Time, isHold, ended bool) {
	return holdState(props.LeaseState, props.LeaseDuration, props.Metadata, props.Date)
}

// holdState is longHold for a blob's lease state and duration, metadata
// and the Date of the response that read them (a listing's, too).
func holdState(st *azlease.StateType, d *azlease.DurationType, md map[string]*string, date *time.Time) (until time.Time, isHold, ended bool) {
	if st == nil || *st != azlease.StateTypeLeased || d == nil || *d != azlease.DurationTypeInfinite {
		return time.Time{}, false, false
	}
	v, ok := metaGet(md, metaHoldUntil)
	if !ok {
		return time.Time{}, false, false
	}
	until, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false, false
	}
	now := time.Now()
	if date != nil {
		now = *date
	}
	return until, true, !now.Before(until)
}

// endHold ends a long hold that has ended, at once, on condition that the
// blob is still as it was read (If-Match). It releases the hold's own lease
// ID, which Azure refuses once any other lease holds the blob, so it can
// never end someone else's lease. Without that ID in the metadata (edited
// by hand) it breaks the lease instead, still If-Match: every acquisition
// rewrites the metadata, which changes the ETag, and an acquisition whose
// lease were broken between its acquire and its metadata write would fail
// that write (it is conditional on its lease ID) and never run. It reports
// whether the hold is gone.
func (s *Store) endHold(ctx context.Context, name string, bc *blockblob.Client, h endedHold) bool {
	cond := &blob.ModifiedAccessConditions{IfMatch: h.etag}
	var err error
	if h.leaseID != "" {
		lc, cerr := azlease.NewBlobClient(bc, &azlease.BlobClientOptions{LeaseID: &h.leaseID})
		if cerr != nil {
			return false
		}
		_, err = call(ctx, s, func(ctx context.Context) (azlease.BlobReleaseResponse, error) {
			return lc.ReleaseLease(ctx, &azlease.BlobReleaseOptions{ModifiedAccessConditions: cond})
		})
	} else {
		lc, cerr := azlease.NewBlobClient(bc, nil)
		if cerr != nil {
			return false
		}
		_, err = call(ctx, s, func(ctx context.Context) (azlease.BlobBreakResponse, error) {
			return lc.BreakLease(ctx, &azlease.BlobBreakOptions{BreakPeriod: to(int32(0)), ModifiedAccessConditions: cond})
		})
	}
	if err != nil {
		s.log.Debug("azblob: ending a finished hold", "name", name, "err", s.classify(ctx, "end hold", err, nil))
		return false
	}
	return true
}

// keepHeld is ReleaseHeld with a positive hold (see Holds in the package
// doc). The end of the hold is written into the metadata first, conditional
// on our lease ID, for status and for the waiters. A hold that fits in a
// break period (at most the lease's TTL: Azure uses a break period only when
// it is shorter than the lease's remaining time, so the lease is renewed
// first) breaks the lease with that period: Azure refuses every new lease
// until it ends, then the lease is broken, which waiters see as free. A
// longer hold ends at a time on Azure's clock (the Date of a response read
// just before, plus the hold, plus the second the Date truncates) and turns
// the lease into an infinite one (acquiring it again with our own ID): Azure
// refuses every other acquisition until the first acquirer after that end,
// by Azure's clock, releases it with its lease ID, kept in the metadata for
// that (endHold). It wraps lease.ErrNotHeld when Azure says the lease is not
// ours.
func (bl *blobLease) keepHeld(ctx context.Context, hold time.Duration) error {
	s := bl.s
	secs := int32((hold + time.Second - 1) / time.Second)
	long := time.Duration(secs)*time.Second > maxBreak(bl.info.TTL)
	op := "release " + bl.info.Name
	bc := s.blob(bl.info.Name)
	until := time.Now().Add(time.Duration(secs) * time.Second)
	if long {
		props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) { return bc.GetProperties(ctx, nil) })
		if err != nil {
			return s.classify(ctx, op, err, nil)
		}
		if props.Date != nil {
			// Date is whole seconds, up to one behind Azure's clock.
			until = props.Date.Add(time.Duration(secs)*time.Second + time.Second)
		}
	}
	meta := map[string]*string{
		metaHolder:    to(escapeMeta(bl.info.Label)),
		metaToken:     to(strconv.FormatUint(bl.info.Token, 10)),
		metaSince:     to(bl.info.Since.Format(time.RFC3339Nano)),
		metaTTL:       to(strconv.Itoa(int(bl.info.TTL / time.Second))),
		metaHoldUntil: to(until.UTC().Format(time.RFC3339Nano)),
	}
	if long {
		meta[metaHoldLease] = bl.lc.LeaseID()
	}
	_, err := call(ctx, s, func(ctx context.Context) (blob.SetMetadataResponse, error) {
		return bc.SetMetadata(ctx, meta, &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
			LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: bl.lc.LeaseID()},
		}})
	})
	if err != nil {
		return s.classify(ctx, op, err, lease.ErrNotHeld)
	}
	if long {
		_, err = call(ctx, s, func(ctx context.Context) (azlease.BlobAcquireResponse, error) {
			return bl.lc.AcquireLease(ctx, -1, nil)
		})
		if err != nil {
			return s.classify(ctx, op, err, lease.ErrNotHeld)
		}
		return nil
	}
	if err := bl.Renew(ctx); err != nil {
		return err
	}
	_, err = call(ctx, s, func(ctx context.Context) (azlease.BlobBreakResponse, error) {
		return bl.lc.BreakLease(ctx, &azlease.BlobBreakOptions{BreakPeriod: to(secs)})
	})
	if err != nil {
		return s.classify(ctx, op, err, lease.ErrNotHeld)
	}
	return nil
}

// ReleaseHeld gives the lease up with a hold (lease.Holding): at once when
// hold is not positive, otherwise as keepHeld says.
func (bl *blobLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	return storeopt.ReleaseHeld(ctx, hold, bl.Release, bl.keepHeld)
}

// maxBreak is the longest hold a break period keeps for a lease acquired
// with TTL ttl: Azure honours a break period only up to the lease's
// remaining time (and 60s).
func maxBreak(ttl time.Duration) time.Duration { return min(ttl, maxTTL) }
