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
	"strings"
	"sync/atomic"
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

	"github.com/leaderrun/leaderrun/lease"
)

var (
	_ lease.Store     = (*Store)(nil)
	_ lease.Connector = (*Store)(nil)
	_ lease.Connector = (*blobLease)(nil)
)

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

	setupCC  *container.Client // Connect's: one try, a set-up's bound
	answered atomic.Int64      // when the service last answered (UnixNano)
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
	if s.cc, s.setupCC, err = s.newClient(a, a.serviceURL+"/"+t.container, o.CallTimeout); err != nil {
		return nil, err
	}
	for _, n := range notes {
		s.log.Debug("azblob: " + n)
	}
	s.log.Debug("azblob store opened", "container", s.where, "credential", string(s.kind), "call_timeout", s.callTimeout, "poll", s.poll)
	return s, nil
}

// newClient makes the container clients for containerURL with the
// credential a names: one for the calls, whose every try gets half of
// callTimeout, so that one retry fits; one for Connect, whose one try a
// set-up's bound (lease.SetupTimeout, and its caller's) ends. Both share
// the SDK's HTTP connections and one token (sharedToken), so what Connect
// set up is what the next call uses.
func (s *Store) newClient(a auth, containerURL string, callTimeout time.Duration) (calls, setup *container.Client, err error) {
	opts := func(try time.Duration, retries int32) *container.ClientOptions {
		return &container.ClientOptions{ClientOptions: azcore.ClientOptions{
			Retry: policy.RetryOptions{
				MaxRetries:    retries,
				TryTimeout:    try,
				RetryDelay:    100 * time.Millisecond,
				MaxRetryDelay: 500 * time.Millisecond,
			},
			Telemetry: policy.TelemetryOptions{ApplicationID: "leaderrun"},
		}}
	}
	callOpts, setupOpts := opts(max(callTimeout/2, 250*time.Millisecond), 1), opts(lease.SetupTimeout, -1)
	var newCC func(*container.ClientOptions) (*container.Client, error)
	switch a.kind {
	case credConnKey, credKey:
		cred, cerr := container.NewSharedKeyCredential(a.account, a.key)
		if cerr != nil {
			return nil, nil, storeerr.Config("the %s is not valid base64", a.kind)
		}
		newCC = func(o *container.ClientOptions) (*container.Client, error) {
			return container.NewClientWithSharedKeyCredential(containerURL, cred, o)
		}
	case credURLSAS, credConnSAS, credEnvSAS:
		newCC = func(o *container.ClientOptions) (*container.Client, error) {
			return container.NewClientWithNoCredential(containerURL+"?"+a.sas, o)
		}
	default:
		// Fetching a token is set-up: it gets a set-up's bound.
		cred, cerr := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: setupOpts.ClientOptions})
		if cerr != nil {
			return nil, nil, s.clientErr("DefaultAzureCredential", cerr)
		}
		shared := &sharedToken{cred: tokenCred{cred}, turn: make(chan struct{}, 1)}
		newCC = func(o *container.ClientOptions) (*container.Client, error) {
			return container.NewClient(containerURL, shared, o)
		}
	}
	if calls, err = newCC(callOpts); err == nil {
		setup, err = newCC(setupOpts)
	}
	if err != nil {
		return nil, nil, s.clientErr("create client", err)
	}
	return calls, setup, nil
}

// sharedToken is one token for the store's two clients: a token Connect
// fetched is the one the next call sends. One fetch at a time; a caller
// whose context ends while another fetches gives up waiting.
type sharedToken struct {
	cred azcore.TokenCredential
	turn chan struct{}
	key  string // the scopes and tenant tok is for
	tok  azcore.AccessToken
}

func (c *sharedToken) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if o.Claims != "" { // a challenge: a token of its own
		return c.cred.GetToken(ctx, o)
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return azcore.AccessToken{}, ctx.Err()
	}
	defer func() { <-c.turn }()
	key := strings.Join(o.Scopes, " ") + "|" + o.TenantID
	if c.key == key && time.Until(c.tok.ExpiresOn) > 5*time.Minute {
		return c.tok, nil
	}
	tok, err := c.cred.GetToken(ctx, o)
	if err == nil {
		c.key, c.tok = key, tok
	}
	return tok, err
}

// warmFor is how long after an answer the connection it came on is taken
// to be still open (the SDK's transport closes idle ones after 90 s):
// Connect then sends nothing.
const warmFor = 30 * time.Second

// Connect sets up a connection (TCP, TLS, a token) when no answer came
// within warmFor (lease.Connector): one request (the container's
// properties) in a try bounded by ctx and lease.SetupTimeout alone, not
// the call timeout. Any answer of the service but a refusal of the
// credentials means the connection is up.
func (s *Store) Connect(ctx context.Context) error {
	if time.Since(time.Unix(0, s.answered.Load())) < warmFor {
		return nil
	}
	_, err := s.setupCC.GetProperties(ctx, nil)
	var re *azcore.ResponseError
	if err == nil || errors.As(err, &re) && re.StatusCode != 401 && re.StatusCode != 403 {
		s.answered.Store(time.Now().UnixNano())
		return nil
	}
	return s.classify(ctx, "connect", err, nil)
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
	r, err := fn(ctx)
	if re := (*azcore.ResponseError)(nil); err == nil || errors.As(err, &re) {
		s.answered.Store(time.Now().UnixNano())
	} else {
		s.answered.Store(0) // the connection may be gone: Connect looks
	}
	return r, err
}

// oneTry makes the calls under ctx one try of the whole call timeout,
// without the SDK's retry, for a call that a retry cannot repeat: a
// release. Its first try, slow to answer under load but done, would leave
// the retry to find the lease free or another's (LeaseNotPresent,
// LeaseIdMismatch): a run whose lease was its own to the end would be told
// it was lost (seen beside stress-ng: exit 124 after a child that ran 0.2 s
// of a 15 s lease). Acquire and renew are the same request again for the
// same lease ID, and keep the retry.
func oneTry(ctx context.Context, s *Store) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1, TryTimeout: s.callTimeout})
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
		if _, rerr := lc.ReleaseLease(oneTry(rctx, s), nil); rerr != nil {
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

// nextSecondBudget is the time left on a call's deadline below which record
// does not wait for Azure's next second (the wait takes up to 1.1s, the
// metadata write one more round trip).
const nextSecondBudget = 1500 * time.Millisecond

// fallbackOffset is what a token minted without waiting adds to its second.
const fallbackOffset = 500_000

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

// Connect is the store's Connect: a renewal after the connection went
// sets one up within the keeper's bound, not the call timeout.
func (l *blobLease) Connect(ctx context.Context) error { return l.s.Connect(ctx) }

// Release releases the blob lease, in one try (oneTry). It returns an
// error wrapping lease.ErrNotHeld when Azure says the lease is not ours.
func (l *blobLease) Release(ctx context.Context) error {
	_, err := call(oneTry(ctx, l.s), l.s, func(ctx context.Context) (azlease.BlobReleaseResponse, error) { return l.lc.ReleaseLease(ctx, nil) })
	if err != nil {
		return l.s.classify(ctx, "release "+l.info.Name, err, lease.ErrNotHeld)
	}
	return nil
}

var _ lease.Holding = (*blobLease)(nil)

// guid writes a 32-hex-digit request ID as the GUID Azure wants as a lease ID.
func guid(id string) (string, error) {
	if len(id) != 32 || strings.Trim(strings.ToLower(id), "0123456789abcdef") != "" {
		return "", storeerr.Config("request ID must be 32 hex digits (lease.NewID)")
	}
	id = strings.ToLower(id)
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:], nil
}

func to[T any](v T) *T { return &v }
