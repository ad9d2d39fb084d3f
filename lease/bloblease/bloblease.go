// Package bloblease keeps leaderrun's leases in Azure Blob Storage (or
// Azurite), using the service's native blob leases. Like every store
// package it is named for what holds the lease (a blob lease); its URLs
// use the name users know the service by, azblob:// (the Azure SDK's
// package and azcopy's), as pglease's use postgres://.
//
// # Layout
//
// Each lease name owns one empty block blob, NAME.lease, in one container
// (default "leaderrun"). The container and the blob are created on first use;
// racing creators are harmless (create uses If-None-Match: *, and "already
// exists" and 412 on a leased blob count as success). The blob's Azure lease is
// the leaderrun lease: its duration is the TTL, its lease ID is the request's
// 128-bit ID written as a GUID, so an acquire retried after a lost answer is
// granted again instead of locking ourselves out. Right after acquiring, the
// holder writes its record into the blob's metadata, conditioned on the lease
// ID: leaderrun_holder, leaderrun_token, leaderrun_since, leaderrun_ttl. If
// that write fails the lease is released and TryAcquire fails.
//
// # Fencing tokens
//
// The token is max(previous leaderrun_token + 1, the service's clock in
// microseconds), read and written under the lease. The clock is the Date of
// Azure's response (whole seconds). Tokens strictly increase while the
// metadata lives. When it is lost (the blob or its metadata deleted, the
// container re-created) the holder that finds no counter polls until a
// response is dated one second later than the one that found it missing
// (about half a second, once) and uses that second: every earlier token was
// minted from a response dated no later, and is below (its second + 1)·10⁶,
// so the new token is greater than every earlier one. The one assumption is
// that the service's clock does not step back (and fewer than a million
// acquisitions of one name per second, which Azure's round trips rule out).
// Only a call with less than 1.5s left on its deadline (a --call-timeout that
// short) skips the wait and uses the middle of the second instead (D·10⁶ +
// 500000): a token could then repeat only if the counter is lost twice within
// one second and both losses are found by such short calls.
// Tokens stay below 2^53, so JSON readers hold them exactly; a counter that is
// not a number below 2^53 (edited by hand) is refused as corrupt, never
// wrapped.
//
// # Store URLs
//
//	azblob://ACCOUNT[/CONTAINER]                        https://ACCOUNT.blob.core.windows.net
//	azblob+https://HOST[:PORT][/CONTAINER][?SAS]        host-style endpoint (ACCOUNT is HOST's first label)
//	azblob+http(s)://HOST[:PORT]/ACCOUNT/CONTAINER       path-style endpoint, e.g. Azurite
//	azblob+http://127.0.0.1:10000/devstoreaccount1[/CONTAINER]
//	                                                    IP and localhost hosts are always path-style
//	azblob:///CONTAINER, azblob://                      endpoint from AZURE_STORAGE_CONNECTION_STRING,
//	                                                    else https://$AZURE_STORAGE_ACCOUNT.blob.core.windows.net
//
// Every form also takes ?poll=DURATION (100ms to 1m), the Wait interval, and
// any form may carry a SAS token as its query.
//
// # Credentials
//
// The first of these that applies is used: a SAS token in the URL;
// AZURE_STORAGE_CONNECTION_STRING (account key or SAS; only when the URL is the
// short form or names the same account); AZURE_STORAGE_KEY (for the URL's
// account, or AZURE_STORAGE_ACCOUNT in the short form); AZURE_STORAGE_SAS_TOKEN;
// otherwise azidentity's DefaultAzureCredential (environment, workload or
// managed identity, Azure CLI), which needs an https endpoint. Keys and SAS
// signatures never appear in errors or logs.
//
// # Timing
//
// Azure leases last a whole number of seconds from 15 to 60, so Limits reports
// MinTTL 15s, MaxTTL 60s, TTLUnit 1s and Epsilon 1s, and TryAcquire refuses any
// other TTL before contacting Azure. Every call is bounded by
// Options.CallTimeout (and the caller's context): the SDK retries once, with a
// per-try timeout of half the call timeout. Wait polls the blob's lease state
// every PollInterval on average, jittered ±25% so waiters spread out.
//
// # Holds
//
// ReleaseHeld (leaderrun --hold-at-least) keeps the lease taken after the
// holder is done. A hold no longer than the lease's TTL is a break period:
// Azure keeps the lease for it, then breaks it. A longer one, up to any
// length (leaderrun bounds it at 31 days), writes its end (leaderrun_hold_until,
// on Azure's clock) and its lease ID (leaderrun_hold_lease) into the
// metadata, conditional on that lease ID, then makes the lease infinite by
// acquiring it again with the same ID, which Azure allows for an active
// lease. Azure then refuses every other acquisition, and no process of the
// holder stays alive. The first TryAcquire that finds such a lease with its
// end passed, by the Date of Azure's response, releases it with the hold's
// lease ID, on condition (If-Match) that the blob still has the ETag it
// read, and tries once more; Wait, Status and the standby listing count it
// as free. Of many standbys that find the end at once, one release
// succeeds; the others' fail and they see the new holder.
//
// Ending a hold never ends a running holder's lease, so exclusion never
// depends on the hold: Azure releases a lease only for its own ID, and the
// hold's ID is that of a holder that has finished (only ReleaseHeld makes a
// lease infinite; a running holder's lease has the TTL). Once anyone else
// acquires the blob, that ID no longer matches and the release fails. A
// hold ends later than asked only by the poll interval and the Date's whole
// second.
//
// # What is not guaranteed
//
// Holder details in a HeldError or from Status are read from metadata and can
// lag for the instant between another holder's acquire and its metadata
// write. A holder that crashes leaves its lease to expire on Azure's clock: up
// to the TTL after its last renewal. Release is retried once on a network
// error; if the first try took effect, the second reports ErrNotHeld. As with
// every time-based lease, exclusion holds only while timing assumptions hold;
// the fencing token is the defence for resources that check it.
package bloblease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/leaderrun/leaderrun/lease/internal/background"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"

	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Store = (*Store)(nil)

// Defaults for Options.
const (
	DefaultCallTimeout  = 5 * time.Second
	DefaultPollInterval = time.Second
)

// Azure's lease duration bounds.
const (
	minTTL = 15 * time.Second
	maxTTL = 60 * time.Second
)

// Metadata keys of the holder record.
const (
	metaHolder = "leaderrun_holder"
	metaToken  = "leaderrun_token"
	metaSince  = "leaderrun_since"
	metaTTL    = "leaderrun_ttl"
	// metaHoldUntil is the end of a hold (ReleaseHeld), written just
	// before the lease is broken with that break period or made infinite.
	metaHoldUntil = "leaderrun_hold_until"
	// metaHoldLease is the lease ID of an infinite hold, with which the
	// first acquirer after its end releases it (endHold). Knowing it grants
	// nothing: using a lease ID takes write access to the blob, which can
	// break any lease anyway.
	metaHoldLease = "leaderrun_hold_lease"
)

// Options configures Open; the zero value is usable. CallTimeout bounds one
// call to Azure, retries included; the SDK's per-try timeout is half of
// it. Getenv reads credentials and the short form's account. Wait polls
// every DefaultPollInterval, or the store URL's poll=.
type Options = lease.OpenOptions

// Store keeps leases as blob leases in one container. It is safe for
// concurrent use and holds no resources beyond the SDK's shared HTTP client.
type Store struct {
	cc          *container.Client
	where       string // endpoint/container, for messages (no query)
	kind        credKind
	secrets     []string
	callTimeout time.Duration
	poll        time.Duration
	log         *slog.Logger

	// leaving tracks standbys' Leave calls still in flight (candidates.go);
	// Close waits for them.
	leaving background.Group
}

// Open parses a store URL (see the package doc) and builds the client. It
// reads the environment but does not contact Azure: bad credentials show up on
// the first call. Errors wrap lease.ErrConfig and never contain a secret.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	_ = ctx // reserved: opening does no I/O
	if o.Getenv == nil {
		o.Getenv = osGetenv
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	t, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	a, notes, err := resolve(t, o.Getenv)
	if err != nil {
		return nil, err
	}
	s := &Store{
		where:       a.serviceURL + "/" + t.container,
		kind:        a.kind,
		secrets:     a.secrets(),
		callTimeout: o.CallTimeout,
		poll:        DefaultPollInterval,
		log:         o.Log,
	}
	if t.poll > 0 {
		s.poll = t.poll
	}
	if s.cc, err = s.newClient(a, a.serviceURL+"/"+t.container, o.CallTimeout); err != nil {
		return nil, err
	}
	for _, n := range notes {
		s.log.Debug("azblob: " + n)
	}
	s.log.Debug("azblob store opened", "container", s.where, "credential", string(s.kind), "call_timeout", s.callTimeout, "poll", s.poll)
	return s, nil
}

// newClient makes the container client for containerURL with the
// credential a names. Each try of a call gets half of callTimeout, so that
// one retry fits.
func (s *Store) newClient(a auth, containerURL string, callTimeout time.Duration) (*container.Client, error) {
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    1,
			TryTimeout:    max(callTimeout/2, 250*time.Millisecond),
			RetryDelay:    100 * time.Millisecond,
			MaxRetryDelay: 500 * time.Millisecond,
		},
		Telemetry: policy.TelemetryOptions{ApplicationID: "leaderrun"},
	}}
	var (
		cc  *container.Client
		err error
	)
	switch a.kind {
	case credConnKey, credKey:
		cred, cerr := container.NewSharedKeyCredential(a.account, a.key)
		if cerr != nil {
			return nil, storeerr.Config("the %s is not valid base64", a.kind)
		}
		cc, err = container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	case credURLSAS, credConnSAS, credEnvSAS:
		cc, err = container.NewClientWithNoCredential(containerURL+"?"+a.sas, opts)
	default:
		cred, cerr := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: opts.ClientOptions})
		if cerr != nil {
			return nil, s.clientErr("DefaultAzureCredential", cerr)
		}
		cc, err = container.NewClient(containerURL, tokenCred{cred}, opts)
	}
	if err != nil {
		return nil, s.clientErr("create client", err)
	}
	return cc, nil
}

// Limits reports Azure's lease bounds.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{Expires: true, Epsilon: time.Second, MinTTL: minTTL, MaxTTL: maxTTL, TTLUnit: time.Second}
}

// Close waits for the standby removals still in flight (each bounded by the
// call timeout); the SDK's HTTP client is shared and needs no closing.
func (s *Store) Close() error {
	s.leaving.Close()
	return nil
}

// blobName maps a lease name to its blob. The suffix keeps names such as "a."
// away from Azure's trailing-dot rules.
func blobName(name string) string { return name + ".lease" }

func (s *Store) blob(name string) *blockblob.Client { return s.cc.NewBlockBlobClient(blobName(name)) }

// call runs fn under the per-call timeout.
func call[T any](ctx context.Context, s *Store, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	return fn(ctx)
}

// TryAcquire makes one attempt to take the lease. req.TTL must be a whole
// number of seconds from 15s to 60s and req.ID 32 hex digits (lease.NewID);
// anything else fails with lease.ErrConfig before any call to Azure.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if req.TTL < minTTL || req.TTL > maxTTL || req.TTL%time.Second != 0 {
		return nil, storeerr.Config("lease TTL %v: Azure leases last a whole number of seconds from 15s to 60s", req.TTL)
	}
	leaseID, err := guid(req.ID)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire %s: %w", req.Name, err)
	}
	bc := s.blob(req.Name)
	lc, err := azlease.NewBlobClient(bc, &azlease.BlobClientOptions{LeaseID: &leaseID})
	if err != nil {
		return nil, fmt.Errorf("Azure Blob Storage at %s: acquire %s: no lease client: %w", s.where, req.Name, err)
	}
	secs := int32(req.TTL / time.Second)
	acquire := func(ctx context.Context) (azlease.BlobAcquireResponse, error) { return lc.AcquireLease(ctx, secs, nil) }
	_, err = call(ctx, s, acquire)
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
		if err := s.create(ctx, req.Name, bc, bloberror.HasCode(err, bloberror.ContainerNotFound)); err != nil {
			return nil, err
		}
		_, err = call(ctx, s, acquire)
	}
	if bloberror.HasCode(err, bloberror.LeaseAlreadyPresent, bloberror.LeaseIsBreakingAndCannotBeAcquired) {
		he, ended := s.held(ctx, req.Name, bc)
		if ended == nil || !s.endHold(ctx, req.Name, bc, *ended) {
			return nil, he
		}
		// The hold that kept the lease taken has ended: try once more.
		if _, err = call(ctx, s, acquire); bloberror.HasCode(err, bloberror.LeaseAlreadyPresent, bloberror.LeaseIsBreakingAndCannotBeAcquired) {
			return nil, he
		}
	}
	if err != nil {
		return nil, s.classify(ctx, "acquire "+req.Name, err, nil)
	}
	l := &blobLease{s: s, lc: lc}
	if err := l.record(ctx, bc, req); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.callTimeout)
		defer cancel()
		if _, rerr := lc.ReleaseLease(rctx, nil); rerr != nil {
			s.log.Debug("azblob: release after a failed metadata write", "name", req.Name, "err", s.classify(rctx, "release", rerr, lease.ErrNotHeld))
		}
		return nil, err
	}
	return l, nil
}

// create makes the container (when missing) and the empty blob, tolerating
// racing creators and a blob another creator has already leased.
func (s *Store) create(ctx context.Context, name string, bc *blockblob.Client, needContainer bool) error {
	if needContainer {
		_, err := call(ctx, s, func(ctx context.Context) (container.CreateResponse, error) { return s.cc.Create(ctx, nil) })
		if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return s.classify(ctx, "create container", err, nil)
		}
		s.log.Debug("azblob: container created", "container", s.where)
	}
	_, err := call(ctx, s, func(ctx context.Context) (blockblob.UploadResponse, error) {
		return bc.Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)), &blockblob.UploadOptions{
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to(azcore.ETagAny)}},
		})
	})
	var re *azcore.ResponseError
	if err != nil && !bloberror.HasCode(err, bloberror.BlobAlreadyExists) && !(errors.As(err, &re) && re.StatusCode == 412) {
		return s.classify(ctx, "create blob for "+name, err, nil)
	}
	return nil
}

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

// Status returns the holder recorded in metadata while the blob is leased
// (or breaking), and nil when it is free or missing.
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	props, err := call(ctx, s, func(ctx context.Context) (blob.GetPropertiesResponse, error) {
		return s.blob(name).GetProperties(ctx, nil)
	})
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.classify(ctx, "status "+name, err, nil)
	}
	if free(props.LeaseState) {
		return nil, nil
	}
	h := holderFrom(name, props.Metadata)
	if _, isHold, ended := longHold(props); isHold {
		if ended {
			return nil, nil // the next acquisition ends it
		}
		return &h, nil
	}
	if props.LeaseState == nil || *props.LeaseState != azlease.StateTypeBreaking {
		h.HeldUntil, h.Remaining = time.Time{}, 0
	}
	return &h, nil
}

func free(st *azlease.StateType) bool {
	if st == nil {
		return true
	}
	switch *st {
	case azlease.StateTypeLeased, azlease.StateTypeBreaking:
		return false
	}
	return true
}

// blobLease is one acquisition.
type blobLease struct {
	s    *Store
	lc   *azlease.BlobClient
	info lease.Holder // written once by record, before the lease is shared
}

// maxToken bounds fencing tokens: from 2^53 on, JSON readers lose integers.
const maxToken = 1<<53 - 1

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
	l.info = lease.Holder{
		Name:  req.Name,
		Label: req.Label,
		ID:    req.ID,
		Token: token,
		Since: wallclock.Now().UTC().Truncate(time.Millisecond),
		TTL:   req.TTL,
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

// nextSecondBudget is the time left on a call's deadline below which record
// does not wait for Azure's next second (the wait takes up to 1.1s, the
// metadata write one more round trip).
const nextSecondBudget = 1500 * time.Millisecond

// fallbackOffset is what a token minted without waiting adds to its second.
const fallbackOffset = 500_000

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

// Info returns the holder record written at acquisition.
func (l *blobLease) Info() lease.Holder { return l.info }

// Renew renews the blob lease for its TTL. It returns an error wrapping
// lease.ErrLost when Azure says the lease is gone, broken or someone else's.
func (l *blobLease) Renew(ctx context.Context) error {
	_, err := call(ctx, l.s, func(ctx context.Context) (azlease.BlobRenewResponse, error) { return l.lc.RenewLease(ctx, nil) })
	if err != nil {
		return l.s.classify(ctx, "renew "+l.info.Name, err, lease.ErrLost)
	}
	return nil
}

// Release releases the blob lease. It returns an error wrapping
// lease.ErrNotHeld when Azure says the lease is not ours.
func (l *blobLease) Release(ctx context.Context) error {
	_, err := call(ctx, l.s, func(ctx context.Context) (azlease.BlobReleaseResponse, error) { return l.lc.ReleaseLease(ctx, nil) })
	if err != nil {
		return l.s.classify(ctx, "release "+l.info.Name, err, lease.ErrNotHeld)
	}
	return nil
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

var _ lease.Holding = (*blobLease)(nil)

// maxBreak is the longest hold a break period keeps for a lease acquired
// with TTL ttl: Azure honours a break period only up to the lease's
// remaining time (and 60s).
func maxBreak(ttl time.Duration) time.Duration { return min(ttl, maxTTL) }

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

// guid writes a 32-hex-digit request ID as the GUID Azure wants as a lease ID.
func guid(id string) (string, error) {
	if len(id) != 32 || strings.Trim(strings.ToLower(id), "0123456789abcdef") != "" {
		return "", storeerr.Config("request ID must be 32 hex digits (lease.NewID)")
	}
	id = strings.ToLower(id)
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:], nil
}

func to[T any](v T) *T { return &v }
