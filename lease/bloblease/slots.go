package bloblease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/leaderrun/leaderrun/lease"
)

// Slots (lease.Request.Slots above 1). Each slot of lease NAME is a lease of
// its own: slot 0 is NAME.lease itself, slot k the blob NAME~k.lease ('~'
// is in no lease name). A slot's token is first minted as a lease's is,
// from its own blob and the response's Date, and then passed through the
// counter NAME~token, an empty blob whose metadata holds the last token
// given to any slot of NAME: the token becomes max(minted, counter + 1),
// written back under If-Match on the counter's ETag (retried when another
// slot wrote it first). Azure's Date counts whole seconds, so slots taken
// in one second would otherwise mint the same token; with the counter,
// tokens strictly increase across the slots. A lease taken without slots
// never touches the counter.

// tokenBlobName is the counter blob of the slots of lease name.
func tokenBlobName(name string) string {
	base, _, _ := lease.ParseSlotName(name)
	return base + "~token"
}

// sharedTokenTries bounds the compare-and-swap rounds on the counter.
const sharedTokenTries = 20

// sharedToken returns the token of a slot of lease name that minted floor
// on its own: above every token the counter has given.
func (s *Store) sharedToken(ctx context.Context, name string, floor uint64) (uint64, error) {
	cb := s.cc.NewBlockBlobClient(tokenBlobName(name))
	for range sharedTokenTries {
		props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) { return cb.GetProperties(ctx, nil) })
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			if ok, err := s.createCounter(ctx, cb, floor); ok || err != nil {
				return floor, err
			}
			continue // created by another slot meanwhile
		}
		if err != nil {
			return 0, s.classify(ctx, "read the token counter of "+name, err, nil)
		}
		tok := floor
		if v, ok := metaGet(props.Metadata, metaToken); ok {
			cur, err := strconv.ParseUint(v, 10, 64)
			if err != nil || cur >= maxToken {
				return 0, lease.NewError(fmt.Sprintf("Azure Blob Storage at %s: the token counter %s holds %q, not a token; inspect it, then delete it", s.where, tokenBlobName(name), v), lease.ErrConfig)
			}
			tok = max(floor, cur+1)
		}
		meta := map[string]*string{metaToken: to(strconv.FormatUint(tok, 10))}
		_, err = call(ctx, s, func(ctx context.Context) (blob.SetMetadataResponse, error) {
			return cb.SetMetadata(ctx, meta, &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
				ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: props.ETag},
			}})
		})
		if err == nil {
			return tok, nil
		}
		if !conditionFailed(err) {
			return 0, s.classify(ctx, "write the token counter of "+name, err, nil)
		}
	}
	return 0, lease.NewError(fmt.Sprintf("Azure Blob Storage at %s: the token counter %s kept changing under %d tries", s.where, tokenBlobName(name), sharedTokenTries), lease.ErrUnavailable)
}

// createCounter creates the counter holding tok; ok is false when another
// slot created it first.
func (s *Store) createCounter(ctx context.Context, cb *blockblob.Client, tok uint64) (ok bool, _ error) {
	_, err := call(ctx, s, func(ctx context.Context) (blockblob.UploadResponse, error) {
		return cb.Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)), &blockblob.UploadOptions{
			Metadata:         map[string]*string{metaToken: to(strconv.FormatUint(tok, 10))},
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to(azcore.ETagAny)}},
		})
	})
	switch {
	case err == nil:
		return true, nil
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists) || conditionFailed(err):
		return false, nil
	}
	return false, s.classify(ctx, "create the token counter", err, nil)
}

// conditionFailed reports a write refused by its access condition (412).
func conditionFailed(err error) bool {
	var re *azcore.ResponseError
	return bloberror.HasCode(err, bloberror.ConditionNotMet) || errors.As(err, &re) && re.StatusCode == 412
}

var _ lease.SlotLister = (*Store)(nil)

// ListSlots returns the slots k ≥ 1 of lease name that have a blob, held or
// not, in one listing of the blobs NAME~… (only a slot's blob is NAME~K.lease:
// '~' is in no lease name), so that reading a lease whose slot count is not
// known (status, watch, a free lease) costs a listing, not a read of every
// possible slot. Listing needs the same permission as the standbys'
// listing; without it, every slot that may exist is named, as before.
func (s *Store) ListSlots(ctx context.Context, name string) ([]int, error) {
	prefix := name + "~"
	pager := s.cc.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	var ks []int
	for pager.More() {
		page, err := call(ctx, s, func(ctx context.Context) (container.ListBlobsFlatResponse, error) { return pager.NextPage(ctx) })
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return nil, nil
		}
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == 403 {
			// A SAS without list permission: leases work without listing
			// (as without standbys), so name every slot that may exist.
			return allSlots(), nil
		}
		if err != nil {
			return nil, s.classify(ctx, "slots of "+name, err, nil)
		}
		if page.Segment == nil {
			continue
		}
		for _, it := range page.Segment.BlobItems {
			if it == nil || it.Name == nil {
				continue
			}
			slot, ok := strings.CutSuffix(*it.Name, ".lease")
			if base, k, okk := lease.ParseSlotName(slot); ok && okk && base == name && k >= 1 {
				ks = append(ks, k)
			}
		}
	}
	slices.Sort(ks)
	return slices.Compact(ks), nil
}

// allSlots is every slot k ≥ 1 that may exist.
func allSlots() []int {
	ks := make([]int, 0, lease.MaxSlots-1)
	for k := 1; k < lease.MaxSlots; k++ {
		ks = append(ks, k)
	}
	return ks
}
