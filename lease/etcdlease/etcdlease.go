// Package etcdlease keeps leaderrun's leases in etcd (v3 API), through the
// official client go.etcd.io/etcd/client/v3.
//
// # Data
//
// A lease named NAME is one key, PREFIX+NAME (PREFIX defaults to
// "leaderrun/"), holding a JSON record {holder, id, since, ttl_s} and
// attached to an etcd lease of its own:
//
//   - acquire = a linearizable read of the key (held by another: answer
//     "held" without writing anything), then Grant a new etcd lease with TTL
//     = the requested TTL (whole seconds), then one transaction "if the
//     key's create revision is 0
//     (absent): put the record with that lease, else: read the key". A key
//     that already carries our acquisition ID is an earlier attempt of ours
//     whose answer was lost: its lease is kept alive once and adopted. The
//     unused lease of a refused attempt is revoked.
//   - renew = one keep-alive of our etcd lease, then a linearizable read of the
//     key: the lease must be alive and the key must still be the one we
//     created (same create revision, same lease). (A deposed leader that has
//     not noticed yet may still take a keep-alive, etcd 3.4 does not check;
//     but a new leader restarts every lease's full TTL plus an election
//     timeout when it takes over, which is no earlier than the old one could
//     last renew, so such a renewal never promises more than the cluster
//     keeps.) The client's background
//     keep-alive is never used: the keeper decides when to renew, and each
//     renewal is bounded by its deadline.
//   - release = a transaction "if the key is still ours: delete it" (and,
//     with ReleaseEnding, "put the run's end record" in the same
//     transaction, so a run's end costs no Raft write of its own). Our
//     etcd lease is not revoked: nothing is attached to it any more, and
//     it runs out its TTL by itself, as `etcdctl lock` leaves its session's
//     lease; a revoke would be one more Raft write before leaderrun could
//     exit.
//
// # Fencing tokens
//
// The token is the key's create revision: etcd's revision counter is one per
// cluster, bumped by every write and never reused, so a later acquisition of
// the same name always gets a greater token, and nothing extra has to be
// stored. It goes back only if the cluster's data does (restored from an old
// snapshot without --bump-revision, or rebuilt from scratch).
//
// # Time
//
// etcd leases are whole seconds, counted by the cluster leader from when it
// applies the grant or receives the keep-alive, which is no earlier than when
// the client sent it. A new leader restarts every lease's full TTL (plus an
// election timeout), so leader changes only lengthen leases. The shortest TTL
// etcd grants is 1.5 election timeouts rounded up to a second (2 s with the
// default 1 s election timeout): a shorter request is silently raised by the
// server, so TryAcquire refuses TTLs below MinTTL or not whole seconds before
// contacting etcd, and refuses a grant longer than asked.
//
// Every call is bounded by Options.CallTimeout and the caller's context; the
// client retries a unary call at most twice within that, and renewals carry
// "require leader", so a member cut off from the majority answers at once
// instead of waiting. The client does no background work of its own besides
// gRPC's connection management: no auto-sync of endpoints, no background
// lease keep-alive. gRPC health checking holds a stream to each member, and
// connection keep-alive pings on it (every 10 s) notice a frozen member.
//
// # What is not guaranteed
//
// etcd is linearizable: the transaction that creates the key is agreed by a
// majority, and a member cut off from the majority can neither grant,
// renew nor read, so a holder behind a minority partition loses its lease
// (its renewals fail) while the majority side expires it and may hand it
// over. As with every time-based lease, exclusion holds only while the
// timing assumptions hold (a holder paused longer than its lease is not
// stopped by the lease); the fencing token is the defence for resources that
// check it.
package etcdlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/background"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/grpclog"
	_ "google.golang.org/grpc/health" // client-side health checking (see client)
)

// DefaultCallTimeout bounds one store call when Options.CallTimeout is zero.
const DefaultCallTimeout = 2 * time.Second

// MinTTL is the shortest lease etcd grants with its default election timeout
// (1 s): 1.5 election timeouts, rounded up to whole seconds.
const MinTTL = 2 * time.Second

// epsilon is the store's granularity margin ε. etcd counts a lease on the
// leader's monotonic clock from no earlier than the request was sent, and
// checks for expiry every 500 ms (late, never early); the rest is headroom.
const epsilon = 10 * time.Millisecond

// keepAliveEvery is how often gRPC pings an idle connection (10 s is the
// least gRPC allows); an unanswered ping within the call timeout closes it,
// so a frozen member stops getting requests.
const keepAliveEvery = 10 * time.Second

// Options tunes a Store; the zero value is usable. CallTimeout bounds every
// call to etcd, and the dial and authentication when the client is
// created. Getenv reads ETCDCTL_USER and ETCDCTL_PASSWORD. Log receives
// debug messages, including the etcd client's own log lines; the first
// Open also routes gRPC's process-wide log lines to it at debug level (gRPC
// allows that only before any other gRPC use in the process).
type Options = lease.OpenOptions

// Store is a lease.Store on etcd. It is safe for concurrent use; Close it
// when done.
type Store struct {
	cfg         *config
	callTimeout time.Duration
	log         *slog.Logger

	mu     sync.Mutex
	cli    *clientv3.Client // made on first use
	closed bool

	tokMu    sync.Mutex // held while logging in
	token    string     // the current auth token (see auth.go)
	loggedIn bool

	plain plainToTLS       // whether a plain URL names a TLS port (tls.go)
	regs  registrations    // our standby keys (candidates.go)
	bg    background.Group // background Leaves, waited for by Close
}

var (
	_ lease.Store     = (*Store)(nil)
	_ lease.Connector = (*Store)(nil)
	_ lease.Connector = (*etcdLease)(nil)
)

var libraryLog sync.Once

// Open returns a store for the etcd cluster named by raw (see docs/stores.md for
// the URL forms). Errors wrap lease.ErrConfig (bad URL, refused credentials,
// unusable TLS files, a server certificate that does not verify); none
// contains the password. Without credentials or TLS Open does not contact
// etcd; with TLS it makes one handshake to verify the server's certificate. With credentials it authenticates at once, so a
// wrong password is reported here; a cluster that cannot be reached yet is
// not an error: the store is returned and its calls report ErrUnavailable
// until etcd answers, so a waiting instance keeps trying instead of exiting.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	o.CallTimeout, o.Getenv, o.Log = storeopt.Defaults(o.CallTimeout, DefaultCallTimeout, o.Getenv, o.Log)
	// gRPC logs process-wide to stderr by default (errors); stderr is
	// leaderrun's one-line-per-event log, so send those lines to the first
	// store's logger at debug level.
	libraryLog.Do(func() { grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, slogWriter{o.Log})) })
	c, err := parseURL(raw, o.Getenv)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: c, callTimeout: o.CallTimeout, log: o.Log.With("store", c.display)}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if c.tls != nil {
		if err := s.checkTLS(cctx); err != nil {
			return nil, err
		}
	}
	if _, _, err := s.session(cctx); err != nil {
		if errors.Is(err, lease.ErrUnavailable) && ctx.Err() == nil {
			s.log.Debug("etcd not reachable yet", "err", err)
			return s, nil
		}
		return nil, err
	}
	return s, nil
}

// client returns the etcd client, creating it on first use (which does not
// contact etcd).
func (s *Store) client(ctx context.Context) (*clientv3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.classify("connect", errClosed)
	}
	if s.cli != nil {
		return s.cli, nil
	}
	dial := lease.SetupTimeout
	if dl, ok := ctx.Deadline(); ok {
		dial = min(dial, time.Until(dl))
	}
	if err := ctx.Err(); err != nil || dial <= 0 {
		if err == nil {
			err = context.DeadlineExceeded
		}
		return nil, s.classify("connect", err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            s.cfg.endpoints,
		TLS:                  s.cfg.tls,
		DialTimeout:          dial,
		DialKeepAliveTime:    keepAliveEvery,
		DialKeepAliveTimeout: s.callTimeout,
		AutoSyncInterval:     0, // the URL's endpoints only; no background member list refresh
		MaxUnaryRetries:      2, // within the call's deadline; the keeper retries the rest
		BackoffWaitBetween:   20 * time.Millisecond,
		Logger:               zapToSlog(s.log, s.cfg.secrets),
		DialOptions: []grpc.DialOption{
			grpc.WithConnectParams(grpc.ConnectParams{
				// gRPC's default reconnect backoff grows to 120 s: a member
				// back from a restart would go unused for minutes.
				Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				// A connection's set-up (TCP, TLS, the HTTP/2 preface)
				// on a loaded member may outlast a call: cut short, it
				// would start again from nothing.
				MinConnectTimeout: lease.SetupTimeout,
			}),
			// gRPC health checking keeps one stream open to each member, so
			// the keep-alive pings run on every connection, even between
			// renewals: a frozen member is dropped from the round robin
			// after one unanswered ping instead of taking every third call
			// for as long as it stays frozen. (The resolver's own service
			// config, round robin alone, is replaced by this one.)
			grpc.WithDisableServiceConfig(),
			grpc.WithDefaultServiceConfig(`{"loadBalancingPolicy":"round_robin","healthCheckConfig":{"serviceName":""}}`),
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return nil, s.classify("connect", err)
	}
	s.cli = cli
	return cli, nil
}

// Connect sets up the client, a ready connection to a member (TCP, TLS,
// the HTTP/2 preface) and the login (lease.Connector), bounded by ctx
// alone: a loaded member's slow set-up is a wait, not a failed call. The
// next call uses that connection.
func (s *Store) Connect(ctx context.Context) error {
	cli, _, err := s.session(ctx)
	if err != nil {
		return err
	}
	conn := cli.ActiveConnection()
	for {
		st := conn.GetState()
		switch st {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, st) {
			return s.classify("connect", ctx.Err())
		}
	}
}

// String returns the store URL with the password masked.
func (s *Store) String() string { return s.cfg.display }

func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.callTimeout)
}

// classify classifies err (see classify); an outage of a Store without TLS
// that has never had an answer is a configuration error when its members
// answer a TLS handshake.
func (s *Store) classify(op string, err error) error {
	e := classify(s.cfg.where, op, err, s.cfg.secrets)
	if errors.Is(e, lease.ErrUnavailable) && !errors.Is(err, context.Canceled) && s.seemsTLS() {
		return storeerr.Config("%s seems to speak TLS, and etcd:// is plain gRPC: use etcds://… (with ?ca=FILE when its certificate is not from a system CA, and ?cert=FILE&key=FILE when it wants a client certificate)", s.cfg.where)
	}
	return e
}

func (s *Store) key(name string) string { return s.cfg.prefix + name }

// record is the JSON value of a lease's key.
type record struct {
	Holder string `json:"holder"`
	ID     string `json:"id"`
	Since  string `json:"since"`
	TTLs   int64  `json:"ttl_s"`
	// HeldUntil is set by ReleaseHeld: the holder is done and the key
	// stays until then (RFC3339Nano).
	HeldUntil string `json:"held_until,omitempty"`
}

// holderOf decodes a key for display; the token is its create revision. A
// value that is not our JSON still reports "held", with empty fields.
func holderOf(name string, kv *mvccpb.KeyValue) lease.Holder {
	h := lease.Holder{Name: name, Token: uint64(max(kv.CreateRevision, 0))}
	var r record
	if json.Unmarshal(kv.Value, &r) == nil {
		h.Label, h.ID = r.Holder, r.ID
		h.Since, _ = time.Parse(time.RFC3339Nano, r.Since)
		h.HeldUntil, _ = time.Parse(time.RFC3339Nano, r.HeldUntil)
		if r.TTLs > 0 && r.TTLs <= int64(lease.MaxTTL/time.Second) {
			h.TTL = time.Duration(r.TTLs) * time.Second
		}
	}
	return h
}

// checkTTL refuses what etcd cannot grant exactly.
func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl%time.Second != 0 || ttl > lease.MaxTTL {
		return storeerr.Config("the etcd lease TTL %v must be whole seconds from %v to %v (etcd grants whole seconds, and none shorter than 1.5 election timeouts)", ttl, MinTTL, lease.MaxTTL)
	}
	return nil
}

// TryAcquire makes one attempt: a read of the key, which answers "held"
// when another holds it; else Grant, then the create-if-absent transaction
// (and a Revoke of the unused lease when the key was taken meanwhile). A
// *lease.HeldError carries the current holder, token, since and TTL.
// Retrying with the same req.ID after a lost answer succeeds while the key is
// still ours (and restarts its TTL). A TTL that is not whole seconds from
// MinTTL up wraps lease.ErrConfig, before anything is sent.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if req.ID == "" {
		return nil, storeopt.ErrNoID
	}
	if err := checkTTL(req.TTL); err != nil {
		return nil, err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	ttl := int64(req.TTL / time.Second)
	key := s.key(req.Name)
	// A linearizable read first: a lease held by another costs the cluster
	// one read instead of a grant, a transaction and a revoke, all three
	// Raft writes (a crowd of waiters tries again at every holder change and
	// every reminder). Only the transaction below decides.
	var gr *clientv3.GetResponse
	err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		gr, err = cli.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, s.classify("acquire "+req.Name, err)
	}
	if len(gr.Kvs) == 1 {
		if h := holderOf(req.Name, gr.Kvs[0]); h.ID != req.ID || gr.Kvs[0].Lease == 0 {
			h.ID = ""
			return nil, &lease.HeldError{By: h}
		}
	}
	g, err := s.grant(cctx, req.Name, ttl)
	if err != nil {
		return nil, err
	}
	since := wallclock.Now().UTC()
	val, _ := json.Marshal(record{Holder: req.Label, ID: req.ID, Since: since.Format(time.RFC3339Nano), TTLs: ttl})
	var tr *clientv3.TxnResponse
	err = s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		tr, err = cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).
			Else(clientv3.OpGet(key)).
			Commit()
		return err
	})
	if err != nil {
		// Unknown outcome. The lease expires by itself if the put did not
		// happen; if it did, a retry with the same ID adopts it.
		return nil, s.classify("acquire "+req.Name, err)
	}
	if tr.Succeeded {
		return &etcdLease{s: s, id: g.ID, rev: tr.Header.Revision, info: lease.Holder{
			Name: req.Name, Label: req.Label, ID: req.ID, Token: uint64(tr.Header.Revision),
			Since: since, TTL: req.TTL,
		}}, nil
	}
	s.revoke(cctx, g.ID)
	return s.heldOrOurs(cctx, req, tr)
}

// grant asks for an etcd lease of ttl seconds, and refuses a longer one
// (etcd raises a TTL below its minimum without saying so).
func (s *Store) grant(ctx context.Context, name string, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	var g *clientv3.LeaseGrantResponse
	err := s.do(ctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		g, err = cli.Grant(ctx, ttl)
		return err
	})
	if err != nil {
		return nil, s.classify("acquire "+name, err)
	}
	if g.TTL != ttl {
		s.revoke(ctx, g.ID)
		return nil, storeerr.Config("%s granted a %d s lease when asked for %d s: its shortest lease (1.5 election timeouts) is longer than --ttl; use --ttl %ds or more", s.cfg.where, g.TTL, ttl, g.TTL)
	}
	return g, nil
}

// heldOrOurs reads the answer of a create transaction that found the key
// taken (tr's Else read it): a *lease.HeldError, or the lease when the key
// is our own earlier attempt, whose answer was lost.
func (s *Store) heldOrOurs(ctx context.Context, req lease.Request, tr *clientv3.TxnResponse) (lease.Lease, error) {
	var kv *mvccpb.KeyValue
	if len(tr.Responses) == 1 {
		if kvs := tr.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
			kv = kvs[0]
		}
	}
	if kv == nil { // the key vanished between the compare and the read: cannot happen in one transaction
		return nil, lease.NewError(fmt.Sprintf("%s: acquire %s: the transaction answered neither yes nor the holder", s.cfg.where, req.Name), lease.ErrUnavailable)
	}
	h := holderOf(req.Name, kv)
	if h.ID == req.ID && kv.Lease != 0 {
		// Our earlier attempt, whose answer was lost: restart its TTL and
		// take it. (If its lease has just run out, the key is going: held.)
		err := s.do(ctx, func(ctx context.Context, cli *clientv3.Client) error {
			return keepAliveOnce(ctx, cli, clientv3.LeaseID(kv.Lease))
		})
		if err == nil {
			return &etcdLease{s: s, id: clientv3.LeaseID(kv.Lease), rev: kv.CreateRevision, info: lease.Holder{
				Name: req.Name, Label: req.Label, ID: req.ID, Token: uint64(kv.CreateRevision), Since: h.Since, TTL: req.TTL,
			}}, nil
		} else if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, s.classify("acquire "+req.Name, err)
		}
	}
	h.ID = "" // what renew and release compare against; nobody else needs it
	return nil, &lease.HeldError{By: h}
}

// revoke gives back a lease we do not use; a failure only leaves it to
// expire on its own.
func (s *Store) revoke(ctx context.Context, id clientv3.LeaseID) {
	err := s.do(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Revoke(ctx, id)
		return err
	})
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Debug("unused etcd lease not revoked; it expires by itself", "lease_id", int64(id), "err", s.classify("revoke", err))
	}
}

// Status returns the current holder (ID left out) with its remaining TTL, or
// nil when the lease is free: a linearizable read of the key, then the
// remaining TTL of its etcd lease.
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var gr *clientv3.GetResponse
	err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		gr, err = cli.Get(ctx, s.key(name))
		return err
	})
	if err != nil {
		return nil, s.classify("status "+name, err)
	}
	if len(gr.Kvs) == 0 {
		return nil, nil
	}
	kv := gr.Kvs[0]
	h := holderOf(name, kv)
	h.ID = ""
	if kv.Lease != 0 {
		var ttl *clientv3.LeaseTimeToLiveResponse
		err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
			ttl, err = cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			return err
		})
		if err != nil {
			return nil, s.classify("status "+name, err)
		}
		if ttl.TTL > 0 {
			h.Remaining = time.Duration(ttl.TTL) * time.Second
		}
	}
	return &h, nil
}

// Limits: etcd leases expire; whole seconds from MinTTL.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{Expires: true, Epsilon: epsilon, MinTTL: MinTTL, TTLUnit: time.Second}
}

// Close finishes the standby removals in flight (each bounded by the call
// timeout), then closes the client, which ends its watches and connections
// and waits for their goroutines. Leases from this store must not be used
// afterwards. Close is idempotent.
func (s *Store) Close() error {
	s.bg.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.cli == nil {
		return nil
	}
	err := s.cli.Close()
	if err != nil && !errors.Is(err, context.Canceled) {
		return s.classify("close", err)
	}
	return nil
}

// etcdLease is one acquisition: our etcd lease and the key's create
// revision (the fencing token).
type etcdLease struct {
	s    *Store
	id   clientv3.LeaseID
	rev  int64
	info lease.Holder
}

func (l *etcdLease) Info() lease.Holder { return l.info }

// Connect is the store's Connect: a renewal after the connection broke
// sets one up within the keeper's bound, not the call timeout.
func (l *etcdLease) Connect(ctx context.Context) error { return l.s.Connect(ctx) }

// Renew keeps our etcd lease alive once, then checks that the key is still
// the one we created. It wraps lease.ErrLost when the lease is gone or the
// key was deleted or replaced; any other error means "unknown outcome".
func (l *etcdLease) Renew(ctx context.Context) error {
	cctx, cancel := l.s.callCtx(ctx)
	defer cancel()
	// A member without a leader fails at once instead of queueing the call.
	cctx = clientv3.WithRequireLeader(cctx)
	err := l.s.do(cctx, func(ctx context.Context, cli *clientv3.Client) error {
		return keepAliveOnce(ctx, cli, l.id)
	})
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return lease.NewError(fmt.Sprintf("%s no longer has our lease of %s (it expired or was revoked)", l.s.cfg.where, l.info.Name), lease.ErrLost)
		}
		return l.s.classify("renew "+l.info.Name, err)
	}
	var gr *clientv3.GetResponse
	err = l.s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		gr, err = cli.Get(ctx, l.s.key(l.info.Name), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return l.s.classify("renew "+l.info.Name, err)
	}
	if len(gr.Kvs) == 0 || gr.Kvs[0].CreateRevision != l.rev || gr.Kvs[0].Lease != int64(l.id) {
		return lease.NewError(fmt.Sprintf("%s no longer has our key of lease %s (it was deleted, or another holder took the lease)", l.s.cfg.where, l.info.Name), lease.ErrLost)
	}
	return nil
}

// keepAliveOnce sends one keep-alive for id and reads its answer: one
// attempt. (The client's KeepAliveOnce re-opens the stream in a tight loop
// until the deadline while a member answers "no leader"; the keeper retries
// on its own schedule instead.) It returns rpctypes.ErrLeaseNotFound when the
// lease is gone.
func keepAliveOnce(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) error {
	ctx, cancel := context.WithCancel(ctx) // ends the stream
	defer cancel()
	stream, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseKeepAlive(ctx, grpc.WaitForReady(true))
	if err != nil {
		return clientv3.ContextError(ctx, err)
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		return clientv3.ContextError(ctx, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return clientv3.ContextError(ctx, err)
	}
	if resp.TTL <= 0 {
		return rpctypes.ErrLeaseNotFound
	}
	return nil
}

// Release deletes the key if it is still ours, and leaves our etcd lease,
// which nothing is attached to any more, to run out (see the package
// comment). It wraps lease.ErrNotHeld when the key is gone or another
// holder's.
func (l *etcdLease) Release(ctx context.Context) error { return l.release(ctx) }

// ReleaseEnding is Release with run, the end record of the run this lease
// was taken for, written to the history in the same transaction (see
// lease.EndingRelease): the key is deleted and the record put only while
// the key is still ours, so a run's end costs no Raft write of its own.
//
// etcd refuses a transaction that puts a key when it is out of space (its
// NOSPACE alarm, which lets deletes through) or when the user may not write
// the history's keys, before applying any of it: the lease is then released
// by itself, and the end is left to the caller's RecordRun.
func (l *etcdLease) ReleaseEnding(ctx context.Context, run lease.Run) error {
	// A slot's lease (lease.SlotName) records its runs under the lease's
	// name.
	if name, _, _ := lease.ParseSlotName(l.info.Name); run.Name != name || run.Token != l.info.Token || !run.Ended() {
		return fmt.Errorf("release of lease %s (token %d) with the end record of %s (token %d, ended %v): not this lease's end", l.info.Name, l.info.Token, run.Name, run.Token, run.Ended())
	}
	b, err := json.Marshal(run)
	if err != nil {
		return err
	}
	return l.release(ctx, clientv3.OpPut(runKey(l.s.runKeys(run.Name), run.Token), string(b)))
}

// refusedPut reports whether err is etcd refusing a write for the put it
// carries, before applying anything: out of space, or no permission.
func refusedPut(err error) bool {
	var ee rpctypes.EtcdError
	return errors.As(err, &ee) && (ee == rpctypes.ErrNoSpace || ee == rpctypes.ErrPermissionDenied)
}

var _ lease.EndingRelease = (*etcdLease)(nil)

// release deletes the key if it is still ours, with also (history
// records) in the same transaction; see Release.
func (l *etcdLease) release(ctx context.Context, also ...clientv3.Op) error {
	cctx, cancel := l.s.callCtx(ctx)
	defer cancel()
	key := l.s.key(l.info.Name)
	var tr *clientv3.TxnResponse
	err := l.s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		tr, err = cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", l.rev),
				clientv3.Compare(clientv3.LeaseValue(key), "=", l.id)).
			Then(append([]clientv3.Op{clientv3.OpDelete(key)}, also...)...).
			Commit()
		return err
	})
	if len(also) > 0 && refusedPut(err) { // nothing applied (ReleaseEnding)
		return l.release(ctx)
	}
	if err != nil {
		return l.s.classify("release "+l.info.Name, err)
	}
	if !tr.Succeeded {
		return lease.NewError(fmt.Sprintf("%s no longer had our key of lease %s at release (it expired, was deleted, or another holder took the lease)", l.s.cfg.where, l.info.Name), lease.ErrNotHeld)
	}
	return nil
}

// keepHeld is ReleaseHeld with a positive hold: a new etcd lease of hold (in
// whole seconds, rounded up; etcd may raise it to its shortest lease) is
// granted, and one transaction moves the key to it, still ours (same create
// revision, so the fencing token does not change) and marked with the hold's
// end, if the key is still ours; then our old lease is revoked. The key
// vanishes by itself when the new lease runs out, which wakes the waiters'
// watches. It wraps lease.ErrNotHeld when the key is gone or another
// holder's.
func (el *etcdLease) keepHeld(ctx context.Context, hold time.Duration) error {
	s := el.s
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	secs := int64((hold + time.Second - 1) / time.Second)
	sent := time.Now()
	var g *clientv3.LeaseGrantResponse
	err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		g, err = cli.Grant(ctx, secs)
		return err
	})
	if err != nil {
		return s.classify("release "+el.info.Name, err)
	}
	// The key goes no earlier than the grant was sent plus the granted TTL.
	until := sent.Add(time.Duration(g.TTL) * time.Second)
	val, _ := json.Marshal(record{Holder: el.info.Label, ID: el.info.ID, Since: el.info.Since.UTC().Format(time.RFC3339Nano),
		TTLs: int64(el.info.TTL / time.Second), HeldUntil: until.UTC().Format(time.RFC3339Nano)})
	key := s.key(el.info.Name)
	var tr *clientv3.TxnResponse
	err = s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		tr, err = cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", el.rev),
				clientv3.Compare(clientv3.LeaseValue(key), "=", el.id)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).
			Commit()
		return err
	})
	if err != nil {
		return s.classify("release "+el.info.Name, err)
	}
	s.revoke(cctx, el.id)
	if !tr.Succeeded {
		s.revoke(cctx, g.ID)
		return lease.NewError(fmt.Sprintf("%s no longer had our key of lease %s at release (it expired, was deleted, or another holder took the lease)", s.cfg.where, el.info.Name), lease.ErrNotHeld)
	}
	return nil
}

// ReleaseHeld gives the lease up with a hold (lease.Holding): at once when
// hold is not positive, otherwise as keepHeld says.
func (el *etcdLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	return storeopt.ReleaseHeld(ctx, hold, el.Release, el.keepHeld)
}

var _ lease.Holding = (*etcdLease)(nil)
