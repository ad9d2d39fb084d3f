package bloblease

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
)

// tokenFloor reads what the next token of name must exceed, from the
// blob's properties: the counter (prev), and the service's clock in
// microseconds (now), taken from a later second than props.Date when there
// is no counter.
func (s *Store) tokenFloor(ctx context.Context, bc *blockblob.Client, name string, props blob.GetPropertiesResponse) (prev uint64, now uint64, _ error) {
	v, ok := metaGet(props.Metadata, metaToken)
	if ok {
		n, ok := parseToken(v)
		if !ok || n >= maxToken {
			shown := v
			if len(shown) > 24 {
				shown = shown[:24] + "…"
			}
			return 0, 0, lease.NewError(fmt.Sprintf("Azure Blob Storage at %s: the fencing counter (metadata %s of blob %s) holds %q, which is not a whole number from 0 to 2^53−2: "+
				"refusing to mint a token from it. If nothing edited it on purpose, remove that metadata or the blob: the next token then comes from Azure's clock and is still above every token leaderrun issued",
				s.where, metaToken, blobName(name), shown))
		}
		return n, uint64(props.Date.Unix() * 1e6), nil
	}
	// No counter: the name's first use, or the blob (or its metadata) was
	// lost. Earlier tokens were minted from responses dated no later than
	// props.Date, and each is below (its second + 1)·10⁶; waiting for a
	// later second puts this one above all of them. A call whose deadline
	// leaves no time for that (a --call-timeout under about 1.5s) takes the
	// middle of this second instead: above the tokens minted from this
	// second the usual way (fewer than half a million), below the next
	// second's; only a second such mint within the same second could
	// repeat it.
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < nextSecondBudget {
		s.log.Debug("azblob: no fencing counter and no time to wait for Azure's next second; token from the next second", "name", name)
		return 0, uint64(props.Date.Unix()*1e6 + fallbackOffset), nil
	}
	next, err := s.nextSecond(ctx, bc, *props.Date)
	if err != nil {
		var se *lease.Error
		if errors.As(err, &se) {
			return 0, 0, err
		}
		return 0, 0, s.recordErr(ctx, name, err)
	}
	return 0, uint64(next), nil
}

// record writes the holder record and the next fencing token under the lease.
// The token is max(previous + 1, the service's clock in microseconds), the
// clock read from the Date of a response (whole seconds); see the package
// doc for why it never goes back.
func (l *blobLease) record(ctx context.Context, bc *blockblob.Client, req lease.Request) error {
	s := l.s
	props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) { return bc.GetProperties(ctx, nil) })
	if err != nil {
		return s.recordErr(ctx, req.Name, err)
	}
	if props.Date == nil {
		return lease.NewError(fmt.Sprintf("Azure Blob Storage at %s sent no Date header: cannot mint a fencing token", s.where), lease.ErrUnavailable)
	}
	prev, now, err := s.tokenFloor(ctx, bc, req.Name, props)
	if err != nil {
		return err
	}
	token := max(prev+1, now)
	if req.Slots > 1 { // slots.go: one counter for the slots of a lease
		if token, err = s.sharedToken(ctx, req.Name, token); err != nil {
			return err
		}
	}
	if token > maxToken {
		return lease.NewError(fmt.Sprintf("Azure Blob Storage at %s: the next fencing token for %s would reach 2^53", s.where, req.Name))
	}
	if lease.TokenAhead(token, *props.Date) {
		// Nothing written: the caller releases the Azure lease.
		counter := fmt.Sprintf("the metadata %s of the blob %s", metaToken, blobName(req.Name))
		if req.Slots > 1 {
			counter += " (and of the blobs of its slots and " + tokenBlobName(req.Name) + ")"
		}
		return lease.TokenAheadError(req.Name, token, *props.Date, counter)
	}
	l.info = lease.Holder{
		Name:  req.Name,
		Label: req.Label,
		ID:    req.ID,
		Token: token,
		Since: wallclock.Now().UTC().Truncate(time.Millisecond),
		TTL:   req.TTL,
		// The service's clock, to the second (the response's Date), as
		// the token counts it.
		Granted: props.Date.UTC(),
	}
	meta := map[string]*string{
		metaHolder: to(escapeMeta(req.Label)),
		metaToken:  to(strconv.FormatUint(l.info.Token, 10)),
		metaSince:  to(l.info.Since.Format(time.RFC3339Nano)),
		metaTTL:    to(strconv.Itoa(int(req.TTL / time.Second))),
	}
	_, err = call(ctx, s, func(ctx context.Context) (blob.SetMetadataResponse, error) {
		return bc.SetMetadata(ctx, meta, &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
			LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: l.lc.LeaseID()},
		}})
	})
	if err != nil {
		return s.recordErr(ctx, req.Name, err)
	}
	return nil
}

// nextSecond polls the blob until a response is dated later than after and
// returns that date in microseconds. It takes about half a second on average
// and runs only when a name has no counter.
func (s *Store) nextSecond(ctx context.Context, bc *blockblob.Client, after time.Time) (int64, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) { return bc.GetProperties(ctx, nil) })
		if err != nil {
			return 0, err
		}
		if props.Date != nil && props.Date.After(after) {
			return props.Date.Unix() * 1e6, nil
		}
		if time.Now().After(deadline) {
			return 0, lease.NewError(fmt.Sprintf("Azure Blob Storage at %s: the Date of its responses did not pass %v within 3s: cannot mint a fencing token", s.where, after.Format(time.RFC1123)), lease.ErrUnavailable)
		}
	}
}

// parseToken reads a token written as decimal digits (at most 16, so below
// 10^16); anything else is not a token.
func parseToken(v string) (uint64, bool) {
	if v == "" || len(v) > 16 || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// recordErr classifies a failure between acquiring and recording: a lease
// that vanished meanwhile is worth another attempt.
func (s *Store) recordErr(ctx context.Context, name string, err error) error {
	op := "acquire " + name + ": write holder record"
	if bloberror.HasCode(err, leaseGoneCodes...) {
		return s.classify(ctx, op, err, lease.ErrUnavailable)
	}
	return s.classify(ctx, op, err, nil)
}

// holderFrom reads the holder record from blob metadata. Azure may change
// the case of metadata keys, so lookups ignore case.
func holderFrom(name string, md map[string]*string) lease.Holder {
	h := lease.Holder{Name: name}
	if v, ok := metaGet(md, metaHolder); ok {
		h.Label = unescapeMeta(v)
	}
	if v, ok := metaGet(md, metaToken); ok {
		if n, ok := parseToken(v); ok && n <= maxToken {
			h.Token = n
		}
	}
	if v, ok := metaGet(md, metaSince); ok {
		h.Since, _ = time.Parse(time.RFC3339Nano, v)
	}
	if v, ok := metaGet(md, metaHoldUntil); ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			h.HeldUntil, h.Remaining = t, max(time.Until(t), 0)
		}
	}
	if v, ok := metaGet(md, metaTTL); ok {
		// Informational, written by leaderrun (15-60); anything else is
		// someone's edit and is left out rather than shown negative.
		if n, err := strconv.Atoi(v); err == nil && n > 0 && time.Duration(n) <= lease.MaxTTL/time.Second {
			h.TTL = time.Duration(n) * time.Second
		}
	}
	return h
}

func metaGet(md map[string]*string, key string) (string, bool) {
	for k, v := range md {
		if v != nil && strings.EqualFold(k, key) {
			return *v, true
		}
	}
	return "", false
}

// escapeMeta makes a holder label safe as an HTTP header value: '%',
// spaces, controls and non-ASCII bytes are percent-encoded.
func escapeMeta(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func unescapeMeta(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}
