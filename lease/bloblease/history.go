package bloblease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/appendblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History) is one append blob per lease name, NAME.runs
// beside NAME.lease, holding one JSON lease.Run a line (each appended with a
// newline before it too, so that a line left open by another writer cannot
// swallow it). Every record is one
// Append Block (one round trip): a run's start, then its end, which
// supersedes the start when read (the record of a token with an end wins).
// Readers read the blob from its end, in chunks, down to the runs they need:
// what was appended last is seen first, and junk appended before the newer
// runs cannot hide them. A line that is not a valid record (lease.CheckRun:
// written by hand, forged with a token from the future, another program's,
// or longer than a record can be) is skipped and never counts. A keep in a
// line (older versions wrote the writer's keep there) is ignored: readers
// show every valid run they find, and only a writer's own keep trims.
//
// The blob is compacted by the writer of a start record that finds it
// holding more blocks than 2·slack + 1 (slack = keep/10 + 1; compaction
// leaves one block, each run then adds two: start and end), or more bytes
// than 2·(keep + slack) records can take (1 KiB each at most: junk grows it
// this way): it
// reads the blob from the end, re-creates it empty on the condition that
// nothing was appended since (If-Match on the ETag: a concurrent append
// makes it give up until a later start), and appends the newest keep valid
// runs in one block. So readers see from keep to keep + slack + 1 runs (the
// trim comes at a start record, not at each write), a run's end costs one
// round trip, and compaction, off the release path, comes once every slack
// runs (a read and two writes of a blob of about keep runs). A compaction that fails between the
// re-creation and its append loses the history (best effort, as every
// history write).

var _ lease.History = (*Store)(nil)

// maxRunsRead bounds how much of a blob a read goes through from its end
// (junk included) before it stops; memory stays about one chunk whatever
// the blob holds.
const maxRunsRead = 64 << 20

// runsChunk is how much one ranged read takes.
const runsChunk = 256 << 10

// maxRunLine bounds a line: a record is well under 1 KiB (lease.CheckRun
// bounds its fields); a longer line is junk and skipped unread.
const maxRunLine = 16 << 10

// recordBytes is what compaction allows a record, for the size bound.
const recordBytes = 1 << 10

func runsBlobName(name string) string { return name + ".runs" }

// slack is how many runs beyond keep the blob may gain before compaction.
func slack(keep int) int { return keep/10 + 1 }

// RecordRun appends r to the history of r.Name (see lease.History),
// creating the container and the blob on first use.
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	keep = lease.HistoryKeep(keep)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// A newline before the record too: an append that did not end its line
	// (junk, a cut write) must not swallow it.
	b = append(append([]byte{'\n'}, b...), '\n')
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
	if !r.Ended() && overgrown(resp, len(b), keep) {
		if err := s.compactRuns(ctx, r.Name, ac, keep); err != nil {
			s.log.Debug("azblob: run history not compacted", "name", r.Name, "err", err)
		}
	}
	return nil
}

// overgrown reports whether the blob, after the append that resp answers
// (of n bytes), holds more than 2·slack + 1 blocks (one from the last
// compaction, two a run since) or more bytes than 2·(keep + slack) records
// take.
func overgrown(resp appendblob.AppendBlockResponse, n, keep int) bool {
	if resp.BlobCommittedBlockCount != nil && int(*resp.BlobCommittedBlockCount) > 2*slack(keep)+1 {
		return true
	}
	limit := 2 * (keep + slack(keep))
	if resp.BlobAppendOffset == nil {
		return false
	}
	off, err := strconv.ParseInt(*resp.BlobAppendOffset, 10, 64)
	return err == nil && off+int64(n) > int64(limit)*recordBytes
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

// compactRuns rewrites the history of name with its newest keep valid
// runs, unless a record was appended after it read the blob.
func (s *Store) compactRuns(ctx context.Context, name string, ac *appendblob.Client, keep int) error {
	runs, etag, err := s.readRuns(ctx, name, keep)
	if err != nil || etag == nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range slices.Backward(runs) { // oldest first, as appended
		if err := enc.Encode(r); err != nil {
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
	if buf.Len() == 0 {
		return nil
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
	runs, _, err := s.readRuns(ctx, name, limit)
	return runs, err
}

// readRuns reads the history of name from the end of its blob, one valid
// record per token (the one with an end, else the last), newest first, until
// it has want runs (want <= 0: lease.MaxHistoryKeep), reached the blob's
// start, or went through maxRunsRead bytes; and the blob's ETag when it was
// read (nil when there is no blob yet: an empty history).
func (s *Store) readRuns(ctx context.Context, name string, want int) ([]lease.Run, *azcore.ETag, error) {
	if want <= 0 {
		want = lease.MaxHistoryKeep
	}
	bc := s.cc.NewBlobClient(runsBlobName(name))
	props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) { return bc.GetProperties(ctx, nil) })
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) || err == nil && props.ContentLength == nil {
		return []lease.Run{}, nil, nil
	}
	if err != nil {
		return nil, nil, s.classify(ctx, "read the run history of "+name, err, nil)
	}
	tr := tailReader{b: lease.RunBounds{Name: name, Now: time.Now(), ClockTokens: true}, tokens: map[uint64]bool{}}
	size := *props.ContentLength
	buf := make([]byte, runsChunk, runsChunk+maxRunLine+1) // room for the tail: see tailReader.add
	for pos := size; pos > 0 && size-pos < maxRunsRead && len(tr.tokens) < want; {
		off := max(0, pos-runsChunk)
		chunk, err := s.readRange(ctx, bc, off, buf[:pos-off])
		if err != nil {
			return nil, nil, s.classify(ctx, "read the run history of "+name, err, nil)
		}
		tr.add(chunk, off == 0)
		pos = off
	}
	return lease.NewestRuns(tr.runs, tr.b, want), props.ETag, nil
}

// readRange fills buf with the bytes from off. An append since the read
// began changes nothing below the size read; a compaction re-creates the
// blob, and a range it no longer has is an error (a range it has again
// holds records just the same).
func (s *Store) readRange(ctx context.Context, bc *blob.Client, off int64, buf []byte) ([]byte, error) {
	return call(ctx, s, func(ctx context.Context) ([]byte, error) {
		dl, err := bc.DownloadStream(ctx, &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: off, Count: int64(len(buf))}})
		if err != nil {
			return nil, err
		}
		defer dl.Body.Close()
		if n, err := io.ReadFull(dl.Body, buf); err != nil {
			return nil, fmt.Errorf("read %d bytes of the %d at %d (the blob was re-created?): %w", n, len(buf), off, err)
		}
		return buf, nil
	})
}

// tailReader parses a blob's lines from its end, one chunk at a time, the
// chunks from the last to the first.
type tailReader struct {
	b      lease.RunBounds
	runs   []lease.Run     // valid records, newest line first
	tokens map[uint64]bool // their tokens
	tail   []byte          // the start of the line that an earlier chunk ends
	skip   bool            // tail grew past maxRunLine: drop up to the chunk's last newline
}

// add parses chunk, which ends where the previous chunk (if any) began;
// first says it is the blob's first chunk. The tail is appended to chunk:
// give it the capacity (at most maxRunLine+1 more) to spare an allocation.
func (t *tailReader) add(chunk []byte, first bool) {
	if t.skip {
		i := bytes.LastIndexByte(chunk, '\n')
		if i < 0 {
			return // still inside the overlong line
		}
		chunk, t.skip = chunk[:i+1], false
	}
	buf := append(chunk, t.tail...)
	end := len(buf)
	for i := end - 1; i >= 0; i-- {
		if buf[i] == '\n' {
			t.line(buf[i+1 : end])
			end = i
		}
	}
	t.tail = append([]byte(nil), buf[:end]...)
	switch {
	case first:
		t.line(t.tail)
	case len(t.tail) > maxRunLine:
		t.tail, t.skip = nil, true
	}
}

// line takes one line, if it is a valid record of a size a record can have.
func (t *tailReader) line(l []byte) {
	var r lease.Run
	if len(l) == 0 || len(l) > maxRunLine || json.Unmarshal(l, &r) != nil || lease.CheckRun(r, t.b) != nil {
		return
	}
	t.runs = append(t.runs, r)
	t.tokens[r.Token] = true
}
