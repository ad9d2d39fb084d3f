package bloblease

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/appendblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History) is one append blob per lease name, NAME.runs
// beside NAME.lease, holding one JSON record a line: a lease.Run and the
// keep its writer asked for. Every record is one Append Block (one round
// trip): a run's start, then its end, which supersedes the start when read
// (the record of a token with an end wins). Readers apply the keep of the
// last line: they see the newest keep runs exactly. The blob itself is
// compacted by the writer of a start record that finds it holding more
// blocks than 2·(keep + keep/10 + 1): it reads the blob, re-creates it
// empty on the condition that nothing was appended since (If-Match on the
// ETag: a concurrent append makes it give up until a later start), and
// appends the newest keep runs in one block. So the blob stays below about
// twice keep runs, a run's end costs one round trip, and compaction, off the
// release path, comes once every keep runs or so. A compaction that fails
// between the re-creation and its append loses the history (best effort,
// as every history write).

var _ lease.History = (*Store)(nil)

// maxRunsBlob bounds what Runs reads: MaxHistoryKeep runs of well under
// 1 KiB each, with room for the slack.
const maxRunsBlob = 2 * lease.MaxHistoryKeep << 10

func runsBlobName(name string) string { return name + ".runs" }

// slack is how many runs beyond keep the blob may gain before compaction.
func slack(keep int) int { return keep/10 + 1 }

// runLine is one line of the blob.
type runLine struct {
	lease.Run
	// Keep is the writer's keep (lease.HistoryKeep).
	Keep int `json:"keep"`
}

// RecordRun appends r to the history of r.Name (see lease.History),
// creating the container and the blob on first use.
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	keep = lease.HistoryKeep(keep)
	b, err := json.Marshal(runLine{Run: r, Keep: keep})
	if err != nil {
		return err
	}
	b = append(b, '\n')
	ac := s.cc.NewAppendBlobClient(runsBlobName(r.Name))
	appendRun := func(ctx context.Context) (appendblob.AppendBlockResponse, error) {
		return ac.AppendBlock(ctx, streaming.NopCloser(bytes.NewReader(b)), nil)
	}
	resp, err := call(ctx, s, appendRun)
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
		if err := s.createRuns(ctx, r.Name, ac, bloberror.HasCode(err, bloberror.ContainerNotFound)); err != nil {
			return err
		}
		resp, err = call(ctx, s, appendRun)
	}
	if err != nil {
		return s.classify(ctx, "record run of "+r.Name, err, nil)
	}
	// Two blocks a run (start and end).
	if !r.Ended() && resp.BlobCommittedBlockCount != nil && int(*resp.BlobCommittedBlockCount) > 2*(keep+slack(keep)) {
		if err := s.compactRuns(ctx, r.Name, ac, keep); err != nil {
			s.log.Debug("azblob: run history not compacted", "name", r.Name, "err", err)
		}
	}
	return nil
}

// createRuns creates the empty append blob (and the container when
// missing), tolerating racing creators.
func (s *Store) createRuns(ctx context.Context, name string, ac *appendblob.Client, needContainer bool) error {
	if needContainer {
		_, err := call(ctx, s, func(ctx context.Context) (container.CreateResponse, error) { return s.cc.Create(ctx, nil) })
		if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return s.classify(ctx, "create container", err, nil)
		}
	}
	_, err := call(ctx, s, func(ctx context.Context) (appendblob.CreateResponse, error) {
		return ac.Create(ctx, &appendblob.CreateOptions{
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to(azcore.ETagAny)}},
		})
	})
	var re *azcore.ResponseError
	if err != nil && !bloberror.HasCode(err, bloberror.BlobAlreadyExists) && !(errors.As(err, &re) && re.StatusCode == 412) {
		return s.classify(ctx, "create the run history of "+name, err, nil)
	}
	return nil
}

// compactRuns rewrites the history of name with its newest keep runs,
// unless a record was appended after it read the blob.
func (s *Store) compactRuns(ctx context.Context, name string, ac *appendblob.Client, keep int) error {
	runs, etag, err := s.readRuns(ctx, name)
	if err != nil || etag == nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range runs[:min(len(runs), keep)] {
		if err := enc.Encode(runLine{Run: r, Keep: keep}); err != nil {
			return err
		}
	}
	_, err = call(ctx, s, func(ctx context.Context) (appendblob.CreateResponse, error) {
		return ac.Create(ctx, &appendblob.CreateOptions{
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: etag}},
		})
	})
	if err != nil {
		return s.classify(ctx, "compact the run history of "+name, err, nil)
	}
	_, err = call(ctx, s, func(ctx context.Context) (appendblob.AppendBlockResponse, error) {
		return ac.AppendBlock(ctx, streaming.NopCloser(bytes.NewReader(buf.Bytes())), nil)
	})
	if err != nil {
		return s.classify(ctx, "compact the run history of "+name, err, nil)
	}
	return nil
}

// Runs returns up to limit runs of name, newest first (see lease.History).
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	runs, _, err := s.readRuns(ctx, name)
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(runs) > limit {
		runs = runs[:limit]
	}
	return runs, nil
}

// readRuns reads the history of name, one record per token (the one with
// an end, else the last), newest first, the newest keep of the last line,
// and the blob's ETag (nil when there is no blob yet: an empty history).
func (s *Store) readRuns(ctx context.Context, name string) ([]lease.Run, *azcore.ETag, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	dl, err := s.cc.NewBlobClient(runsBlobName(name)).DownloadStream(ctx, nil)
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
		return []lease.Run{}, nil, nil
	}
	if err != nil {
		return nil, nil, s.classify(ctx, "read the run history of "+name, err, nil)
	}
	defer dl.Body.Close()
	data, err := io.ReadAll(io.LimitReader(dl.Body, maxRunsBlob))
	if err != nil {
		return nil, nil, s.classify(ctx, "read the run history of "+name, err, nil)
	}
	byToken := map[uint64]lease.Run{}
	keep := lease.DefaultHistoryKeep
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxRunsBlob)
	for sc.Scan() {
		var l runLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Token == 0 {
			continue // a line written by hand, or cut by the size bound
		}
		keep = lease.HistoryKeep(l.Keep)
		if old, ok := byToken[l.Token]; ok && old.Ended() && !l.Ended() {
			continue
		}
		byToken[l.Token] = l.Run
	}
	runs := make([]lease.Run, 0, len(byToken))
	for _, r := range byToken {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b lease.Run) int {
		switch {
		case a.Token > b.Token:
			return -1
		case a.Token < b.Token:
			return 1
		}
		return 0
	})
	return runs[:min(len(runs), keep)], dl.ETag, nil
}
