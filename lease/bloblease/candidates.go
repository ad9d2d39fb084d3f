package bloblease

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"

	"github.com/leaderrun/leaderrun/lease"
)

// Standbys (lease.CandidateRegistry). Each waiting instance of lease NAME is
// an empty blob NAME.lease~standby~ID ('~' is in no lease name, so no lease
// name makes a blob starting NAME.lease~standby~, whatever it is)
// whose metadata holds its label, priority, start time and expiry in
// milliseconds. A heartbeat re-uploads it, which moves its Last-Modified on
// the service's clock; a standby is live while Last-Modified + expiry is
// after the Date of the listing's response, so only Azure's clock is read.
// One listing of the prefix NAME.lease returns the lease blob (its lease state
// and holder metadata) and the standbys together. A heartbeat is an upload
// and a listing (which also removes standbys lapsed for a minute), so
// lease.Acquire spaces them to keep all standbys of a lease together within
// heartbeatsPerSecond of them.

var _ lease.CandidateRegistry = (*Store)(nil)

// Metadata of a standby blob.
const (
	metaPriority = "leaderrun_priority"
	metaExpiry   = "leaderrun_expiry_ms"
)

// heartbeatsPerSecond is the budget of heartbeats of all standbys of a lease
// together (each costs two requests).
const heartbeatsPerSecond = 1

// lapsedGrace is how long past its expiry a standby blob is left before a
// Join deletes it: Last-Modified has whole seconds, and a slow heartbeat must
// not find its blob deleted under it.
const lapsedGrace = time.Minute

func standbyPrefix(name string) string { return blobName(name) + "~standby~" }

// Join uploads (or re-uploads) c's blob with expiry and returns the number
// of live standbys.
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	if len(c.ID) != 32 || strings.Trim(c.ID, "0123456789abcdef") != "" {
		return 0, storeerr.Config("candidate ID must be 32 hex digits (lease.NewID)")
	}
	meta := map[string]*string{
		metaHolder:   to(escapeMeta(c.Label)),
		metaPriority: to(strconv.Itoa(c.Priority)),
		metaSince:    to(c.Since.UTC().Format(time.RFC3339Nano)),
		metaExpiry:   to(strconv.FormatInt(expiry.Milliseconds(), 10)),
	}
	bc := s.cc.NewBlockBlobClient(standbyPrefix(name) + c.ID)
	upload := func(ctx context.Context) (blockblob.UploadResponse, error) {
		return bc.Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)), &blockblob.UploadOptions{Metadata: meta})
	}
	_, err := call(ctx, s, upload)
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		if err := s.create(ctx, name, s.blob(name), true); err != nil {
			return 0, err
		}
		_, err = call(ctx, s, upload)
	}
	if err != nil {
		return 0, s.classify(ctx, "join standbys of "+name, err, nil)
	}
	cs, _, lapsed, err := s.list(ctx, name)
	if err != nil {
		return 0, err
	}
	for _, id := range lapsed {
		_, err := call(ctx, s, func(ctx context.Context) (blob.DeleteResponse, error) {
			return s.cc.NewBlobClient(standbyPrefix(name)+id).Delete(ctx, nil)
		})
		if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
			s.log.Debug("azblob: removing a lapsed standby", "name", name, "err", s.classify(ctx, "delete", err, nil))
		}
	}
	return len(cs), nil
}

// Leave deletes the standby's blob. It returns at once and deletes from a
// goroutine the Store owns (Close waits for it): Acquire leaves right after
// winning the lease, and the child should not wait for a request that only
// tidies the list. A failure is logged at debug level; the registration then
// lapses by itself.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	ctx = context.WithoutCancel(ctx)
	leave := func() {
		_, err := call(ctx, s, func(ctx context.Context) (blob.DeleteResponse, error) {
			return s.cc.NewBlobClient(standbyPrefix(name)+id).Delete(ctx, nil)
		})
		if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
			s.log.Debug("azblob: leaving the standbys failed; the registration lapses by itself", "name", name, "err", s.classify(ctx, "leave standbys of "+name, err, nil))
		}
	}
	if !s.leaving.Go(leave) {
		leave() // after Close: at once, as nothing would wait for it
	}
	return nil
}

// Candidates lists the live standbys and the holder in one listing.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	cs, h, _, err := s.list(ctx, name)
	return cs, h, err
}

// list reads the blobs under NAME.lease: the live standbys in takeover order,
// the holder (nil when free), and the IDs of standbys lapsed for more than
// lapsedGrace.
func (s *Store) list(ctx context.Context, name string) (cs []lease.Candidate, h *lease.Holder, lapsed []string, err error) {
	prefix := blobName(name)
	pager := s.cc.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix, Include: container.ListBlobsInclude{Metadata: true}})
	for pager.More() {
		page, err := call(ctx, s, func(ctx context.Context) (container.ListBlobsFlatResponse, error) { return pager.NextPage(ctx) })
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return nil, nil, nil, nil
		}
		if err != nil {
			return nil, nil, nil, s.classify(ctx, "standbys of "+name, err, nil)
		}
		if page.Date == nil || page.Segment == nil {
			return nil, nil, nil, lease.NewError(fmt.Sprintf("Azure Blob Storage at %s: a listing without Date or blobs", s.where), lease.ErrUnavailable)
		}
		now := *page.Date
		for _, it := range page.Segment.BlobItems {
			if it == nil || it.Name == nil || it.Properties == nil {
				continue
			}
			switch bn := *it.Name; {
			case bn == blobName(name):
				// A long hold whose end has passed counts as free, as in
				// Status: the next TryAcquire ends it.
				_, _, ended := holdState(it.Properties.LeaseState, it.Properties.LeaseDuration, it.Metadata, page.Date)
				if !free(it.Properties.LeaseState) && !ended {
					hh := holderFrom(name, it.Metadata)
					h = &hh
				}
			case strings.HasPrefix(bn, standbyPrefix(name)):
				id := strings.TrimPrefix(bn, standbyPrefix(name))
				if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" || it.Properties.LastModified == nil {
					continue
				}
				c, expiry, ok := candidateFrom(id, it.Metadata)
				if !ok {
					continue
				}
				until := it.Properties.LastModified.Add(expiry)
				if !until.After(now) {
					if now.Sub(until) > lapsedGrace {
						lapsed = append(lapsed, id)
					}
					continue
				}
				c.Remaining = until.Sub(now)
				cs = append(cs, c)
			}
		}
	}
	lease.SortCandidates(cs)
	return cs, h, lapsed, nil
}

// candidateFrom reads a standby's metadata.
func candidateFrom(id string, md map[string]*string) (lease.Candidate, time.Duration, bool) {
	c := lease.Candidate{ID: id}
	if v, ok := metaGet(md, metaHolder); ok {
		c.Label = unescapeMeta(v)
	}
	if v, ok := metaGet(md, metaPriority); ok {
		c.Priority, _ = strconv.Atoi(v)
	}
	if v, ok := metaGet(md, metaSince); ok {
		c.Since, _ = time.Parse(time.RFC3339Nano, v)
	}
	v, ok := metaGet(md, metaExpiry)
	if !ok {
		return c, 0, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 || ms > int64(24*time.Hour/time.Millisecond) {
		return c, 0, false
	}
	return c, time.Duration(ms) * time.Millisecond, true
}

// CandidateTiming: heartbeats at least 5s apart within heartbeatsPerSecond;
// δ covers the spread of the waiters' jittered polls (up to 1.25 poll
// intervals after the lease became free) and a listing and an attempt.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	return lease.CandidateTiming{Heartbeat: true, PerSecond: heartbeatsPerSecond, MinInterval: 5 * time.Second, Step: s.poll*3/2 + 500*time.Millisecond}
}
