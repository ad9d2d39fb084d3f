// Package redislease keeps leaderrun's leases in Redis: a single server, a
// Sentinel-managed master or a Cluster, through go-redis' UniversalClient.
//
// # Data
//
// A lease named NAME is two keys in one hash slot (the {NAME} hash tag):
//
//	leaderrun:{NAME}        JSON holder record {holder, id, token, since, ttl_ms}, with a PX TTL
//	leaderrun:{NAME}:token  fencing counter, never expires
//
// and, in the same slot, the capped run history (history.go):
//
//	leaderrun:{NAME}:runs   sorted set of JSON run records, scored by token
//
// Every change is one Lua script (embedded .lua files, run by EVALSHA with an
// EVAL fallback): acquire = "if free: mint the next token into the counter,
// SET the record PX" (or, when the record already carries our acquisition ID,
// a retry of an attempt whose answer was lost: restart its TTL and say yes);
// renew = "if the record carries our ID: PEXPIRE"; release = "if it carries
// our ID: DEL". After a release the client PUBLISHes on
// leaderrun:{NAME}:released, separately and best effort, so a user without
// channel permissions can still release (waiters then wake by PTTL). Renew
// never re-creates a vanished record.
//
// # Fencing tokens
//
// acquire mints token = max(counter + 1, the server's TIME in microseconds)
// and writes it back to the counter. So tokens strictly increase while the
// counter lives, and a token is never below the server's clock at the moment
// it was minted (in practice it equals it: two acquisitions of one name are
// always more than a microsecond apart). When the counter is lost — a restart
// without persistence, a failover to a replica that missed the write, the key
// deleted or evicted — the next token comes from the clock of the server
// that mints it, which is later than every earlier minting: the next token is
// greater than every earlier one. The one assumption is that the servers'
// clock does not step back (across a failover: the new master's clock is not
// behind the old master's by more than the failover took). (A counter raised
// by hand above the clock makes later tokens run ahead of it, and a loss of
// that counter would then go back: leave the counter to leaderrun.) Tokens
// stay below
// 2^53, so JSON readers hold them exactly; they are written into the record
// with %d, never through Lua's cjson, which rounds past 14 digits. A counter
// that is not a number below 2^53 (edited by hand) is refused as corrupt:
// acquire fails with an error that says how to repair it, and never wraps.
//
// # Time
//
// PX and PEXPIRE start counting when the server runs the script, which is no
// earlier than when the client sent it, so a holder that counts its deadline
// from its own send time never overestimates. Every call is bounded by
// Options.CallTimeout and by the caller's context (ContextTimeoutEnabled, at
// most one client retry), so no call outlives the caller's deadline;
// Connect sets a connection up within its caller's bound alone.
//
// # What is not guaranteed
//
// Redis expires keys by its own wall clock: a clock step on the server moves
// every TTL. Replication is asynchronous, so a Sentinel or Cluster failover
// can lose a just-written record (two holders); the fencing token still never
// goes back (see above), so a resource that checks it refuses the older
// holder. The fencing token only protects a resource that checks it. Release notifications are hints: waiters fall back to sleeping
// until the record's PTTL runs out.
package redislease

import (
	"context"
	_ "embed" // Lua scripts
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/internal/wallclock"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/background"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed renew.lua
	renewLua string
	//go:embed release.lua
	releaseLua string
	//go:embed status.lua
	statusLua string
	//go:embed hold.lua
	holdLua string

	acquireScript = script(acquireLua)
	renewScript   = script(renewLua)
	releaseScript = script(releaseLua)
	statusScript  = script(statusLua)
	holdScript    = script(holdLua)
)

// DefaultCallTimeout bounds one store call when Options.CallTimeout is zero.
const DefaultCallTimeout = 2 * time.Second

// MinTTL is the shortest lease Redis stores accept: below it, network round
// trips and the margin ε are a large part of the lease.
const MinTTL = 100 * time.Millisecond

// epsilon is the store's granularity margin ε: PX is in milliseconds and
// Redis documents an expiry error of 0–1 ms; the rest is headroom.
const epsilon = 5 * time.Millisecond

// Options tunes a Store; the zero value is usable. CallTimeout bounds every
// call to Redis (dial, read, write, pool wait). Getenv reads REDISCLI_AUTH
// and LEADERRUN_REDIS_SENTINEL_PASSWORD. Log receives debug messages (the
// release subscription dropping and coming back); the first Open also
// routes go-redis' own process-wide log lines to it at debug level.
type Options = lease.OpenOptions

// Store is a lease.Store on Redis. It is safe for concurrent use; Close it
// when done.
type Store struct {
	client      redis.UniversalClient
	topo        Topology
	display     string
	where       string
	secrets     []string
	callTimeout time.Duration
	log         *slog.Logger

	life context.Context // cancelled by Close; owns the watchers' goroutines
	stop context.CancelFunc

	// noChannel is set once the server refused us the release channel
	// (NOPERM): no more PUBLISH, and waiters poll instead of subscribing.
	noChannel atomic.Bool

	mu       sync.Mutex
	closed   bool
	watchers map[string]*watcher
	wg       sync.WaitGroup
	// bg runs the change announcements and standbys' Leaves in flight
	// (candidates.go); Close waits for them.
	bg background.Group
}

// script returns the Script of src, made on first use: making one hashes
// its source (SHA-1), which every store program's start would otherwise
// pay for each of the package's scripts, and a run uses three or four.
func script(src string) func() *redis.Script {
	return sync.OnceValue(func() *redis.Script { return redis.NewScript(src) })
}

var (
	_ lease.Store     = (*Store)(nil)
	_ lease.Connector = (*Store)(nil)
	_ lease.Connector = (*redisLease)(nil)
)

var libraryLog sync.Once

// Open connects to the Redis named by raw (see docs/stores.md for the URL forms)
// and checks that it answers PING with the given credentials. Errors wrap
// lease.ErrConfig (bad URL, refused credentials, unusable TLS files); none
// contains the password. A server that cannot be reached yet is not an
// error here: the store is returned and its calls report ErrUnavailable
// until the server answers, so a waiting instance (a standby booting before
// Redis) keeps trying instead of exiting.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	o.CallTimeout, o.Getenv, o.Log = storeopt.Defaults(o.CallTimeout, DefaultCallTimeout, o.Getenv, o.Log)
	// go-redis logs process-wide to stderr by default; stderr is leaderrun's
	// one-line-per-event log, so send those lines to the first store's logger.
	libraryLog.Do(func() { redis.SetLogger(slogAdapter{o.Log}) })
	c, err := parseURL(raw, o.Getenv)
	if err != nil {
		return nil, err
	}
	opts := c.opts
	opts.Protocol = 2 // RESP2 works on every server; we need no push frames
	opts.DisableIdentity = true
	opts.ContextTimeoutEnabled = true
	opts.MaxRetries = 1 // one quick retry for a stale pooled connection; the keeper retries the rest
	opts.MinRetryBackoff = 5 * time.Millisecond
	opts.MaxRetryBackoff = 50 * time.Millisecond
	// Every call carries its context's deadline (the call timeout, or the
	// caller's earlier one); reads, writes and dials are bounded by a
	// set-up's time only, so that Connect, which sets a connection up, is
	// bounded by its caller (the wait, or the keeper's stop point), not by
	// a call's time, and the client's own background reads (a Cluster's
	// topology) by something.
	opts.DialTimeout = lease.SetupTimeout
	opts.DialerRetries = 1
	opts.ReadTimeout = lease.SetupTimeout
	opts.WriteTimeout = lease.SetupTimeout
	opts.PoolTimeout = o.CallTimeout
	opts.PoolSize = 8
	// One connection stays open for the calls (and the subscription one
	// for a waiter): a connection opened for a rare overlap (a standby's
	// heartbeat during its check) is closed again, so a fleet of standbys
	// costs the server two connections each, not three.
	opts.MaxIdleConns = 1
	life, stop := context.WithCancel(context.Background())
	s := &Store{
		client:      redis.NewUniversalClient(&opts),
		topo:        c.topo,
		display:     c.display,
		where:       c.where,
		secrets:     c.secrets,
		callTimeout: o.CallTimeout,
		log:         o.Log.With("store", c.display),
		life:        life,
		stop:        stop,
		watchers:    map[string]*watcher{},
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := s.client.Ping(cctx).Err(); err != nil {
		err = s.classify("open", err)
		if errors.Is(err, lease.ErrUnavailable) && ctx.Err() == nil {
			s.log.Debug("redis not reachable yet", "err", err)
			return s, nil
		}
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Connect makes sure a connection to the server is set up
// (lease.Connector): when the pool holds no idle one, a PING on a new one
// (its dial, AUTH and the answer), bounded by ctx alone, so that a loaded
// server's slow set-up is not held to the call timeout. The next call takes
// that connection from the pool.
func (s *Store) Connect(ctx context.Context) error {
	if st := s.client.PoolStats(); st != nil && st.IdleConns > 0 {
		return nil
	}
	return s.classify("connect", s.client.Ping(ctx).Err())
}

// Topology reports whether the store is a single server, Sentinel or Cluster.
func (s *Store) Topology() Topology { return s.topo }

// String returns the store URL with the password masked.
func (s *Store) String() string { return s.display }

func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.callTimeout)
}

func (s *Store) classify(op string, err error) error { return classify(s.where, op, err, s.secrets) }

func recordKey(name string) string   { return "leaderrun:" + tagged(name) }
func counterKey(name string) string  { return "leaderrun:{" + tokenDomain(name) + "}:token" }
func releaseChan(name string) string { return "leaderrun:" + tagged(name) + ":released" }

// maxToken bounds fencing tokens: from 2^53 on, JSON readers (and Lua's
// numbers) lose integers.
const maxToken = 1<<53 - 1

// holderOf decodes a record (the JSON value of leaderrun:{NAME}) for display.
// The other holder's ID is left out: it is what renew and release compare
// against, and nobody else needs it. Each field is decoded on its own, so one
// odd field (a token written as 1e+15 by an older version) does not hide the
// others; a token that is not an exact integer below 2^53 reads as 0
// (unknown). A value that is not our JSON still reports "held", with empty
// fields.
func holderOf(name, raw string, pttl int64) lease.Holder {
	h := lease.Holder{Name: name}
	var r map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &r) == nil {
		_ = json.Unmarshal(r["holder"], &h.Label)
		h.Token = parseToken(r["token"])
		var since string
		if json.Unmarshal(r["since"], &since) == nil {
			h.Since, _ = time.Parse(time.RFC3339Nano, since)
		}
		var ttl int64
		if json.Unmarshal(r["ttl_ms"], &ttl) == nil && ttl > 0 {
			h.TTL = time.Duration(ttl) * time.Millisecond
		}
		var until string
		if json.Unmarshal(r["held_until"], &until) == nil {
			h.HeldUntil, _ = time.Parse(time.RFC3339Nano, until)
		}
	}
	if pttl > 0 {
		h.Remaining = time.Duration(pttl) * time.Millisecond
	}
	return h
}

// parseToken reads a token written as a JSON integer (or, leniently, a
// string of digits); anything else, or a value at or above 2^53, is 0.
func parseToken(raw json.RawMessage) uint64 {
	s := strings.Trim(string(raw), `"`)
	if s == "" || len(s) > 16 || strings.Trim(s, "0123456789") != "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxToken {
		return 0
	}
	return n
}

// TryAcquire makes one attempt, in one round trip. A *lease.HeldError carries
// the current holder, token, since and remaining time. Retrying with the same
// req.ID after a lost answer succeeds while the lease is still ours (and
// restarts its TTL). req.TTL below MinTTL wraps lease.ErrConfig.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := storeopt.CheckRequest(req.ID, req.TTL, "Redis", MinTTL); err != nil {
		return nil, err
	}
	ttl := storeopt.Millis(req.TTL)
	since := wallclock.Now().UTC().Format(time.RFC3339Nano)
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	res, err := acquireScript().Run(cctx, s.client,
		[]string{recordKey(req.Name), counterKey(req.Name)},
		req.ID, ttl, req.Label, since, lease.MaxClockSkew.Microseconds()).Slice()
	if err != nil {
		return nil, s.classify("acquire "+req.Name, err)
	}
	answer := int64(-1)
	if len(res) >= 2 {
		answer, _ = res[0].(int64)
	}
	switch {
	case answer == 2:
		v, _ := res[1].(string)
		shown := v
		if len(shown) > 24 {
			shown = shown[:24] + "…"
		}
		return nil, lease.NewError(fmt.Sprintf("%s: the fencing counter %s holds %q, which is not a whole number from 0 to 2^53−2: refusing to mint a token from it. "+
			"If nothing edited it on purpose, delete it (redis-cli DEL '%s'): the next token then comes from the server's clock and is still above every token leaderrun issued",
			s.where, counterKey(req.Name), shown, counterKey(req.Name)))
	case answer == 3 && len(res) == 3:
		ts, _ := res[1].(string)
		ns, _ := res[2].(string)
		tok, err1 := strconv.ParseUint(ts, 10, 64)
		now, err2 := strconv.ParseInt(ns, 10, 64)
		if err1 == nil && err2 == nil {
			return nil, lease.TokenAheadError(req.Name, tok, time.UnixMicro(now),
				fmt.Sprintf("the counter key at %s (redis-cli DEL '%s')", s.where, counterKey(req.Name)))
		}
		return nil, lease.NewError(fmt.Sprintf("%s: acquire %s: unexpected script answer %v", s.where, req.Name, res))
	case answer == 0 && len(res) == 3:
		raw, _ := res[1].(string)
		pttl, _ := res[2].(int64)
		return nil, &lease.HeldError{By: holderOf(req.Name, raw, pttl)}
	case answer != 1 || len(res) != 4:
		return nil, lease.NewError(fmt.Sprintf("%s: acquire %s: unexpected script answer %v", s.where, req.Name, res))
	}
	token, _ := res[1].(int64)
	at, _ := res[2].(string)
	clock, _ := res[3].(string)
	granted, err := strconv.ParseInt(clock, 10, 64)
	if token <= 0 || token > maxToken || err != nil {
		return nil, lease.NewError(fmt.Sprintf("%s: acquire %s: bad fencing token or server time %v", s.where, req.Name, res[1:]))
	}
	l := &redisLease{s: s, ttl: ttl, info: lease.Holder{
		Name: req.Name, Label: req.Label, ID: req.ID, Token: uint64(token),
		TTL: time.Duration(ttl) * time.Millisecond, Granted: time.UnixMicro(granted).UTC(),
	}}
	l.info.Since, _ = time.Parse(time.RFC3339Nano, at)
	s.announce(req.Name)
	return l, nil
}

// Status returns the current holder (ID left out) with its remaining TTL, or
// nil when the lease is free. One consistent read on the key's master.
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	res, err := statusScript().Run(cctx, s.client, []string{recordKey(name)}).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.classify("status "+name, err)
	}
	if len(res) < 2 {
		return nil, nil
	}
	raw, _ := res[0].(string)
	pttl, _ := res[1].(int64)
	h := holderOf(name, raw, pttl)
	return &h, nil
}

// Limits: Redis leases expire; PX is whole milliseconds.
func (s *Store) Limits() lease.Limits {
	return lease.Limits{Expires: true, Epsilon: epsilon, MinTTL: MinTTL, TTLUnit: time.Millisecond}
}

// Close stops the release subscriptions, waits for their goroutines and
// closes the client. Leases from this store must not be used afterwards.
// Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ws := s.watchers
	s.watchers = nil
	s.mu.Unlock()
	s.bg.Close() // each bounded by the call timeout
	s.stop()
	for _, w := range ws {
		w.close()
	}
	s.wg.Wait()
	return s.client.Close()
}

// redisLease is one acquisition.
type redisLease struct {
	s    *Store
	ttl  int64
	info lease.Holder
}

func (l *redisLease) Info() lease.Holder { return l.info }

// Connect is the store's Connect: a renewal after the pool lost its
// connection sets one up within the keeper's bound, not the call timeout.
func (l *redisLease) Connect(ctx context.Context) error { return l.s.Connect(ctx) }

// Renew restarts the TTL if the record still carries our ID. It wraps
// lease.ErrLost when it does not; any other error means "unknown outcome".
func (l *redisLease) Renew(ctx context.Context) error {
	cctx, cancel := l.s.callCtx(ctx)
	defer cancel()
	n, err := renewScript().Run(cctx, l.s.client, []string{recordKey(l.info.Name)}, l.info.ID, l.ttl).Int64()
	if err != nil {
		return l.s.classify("renew "+l.info.Name, err)
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer has our record of lease %s (it expired, was deleted, or another holder took the lease)", l.s.where, l.info.Name), lease.ErrLost)
	}
	return nil
}

// Release deletes the record if it still carries our ID, then wakes waiters
// with a PUBLISH that is best effort: a user without channel permission
// (NOPERM) or a failed PUBLISH does not make the release fail, waiters then
// wake by PTTL or by polling. It wraps lease.ErrNotHeld when the record is
// gone or another holder's.
func (l *redisLease) Release(ctx context.Context) error {
	cctx, cancel := l.s.callCtx(ctx)
	defer cancel()
	n, err := releaseScript().Run(cctx, l.s.client, []string{recordKey(l.info.Name)}, l.info.ID).Int64()
	if err != nil {
		return l.s.classify("release "+l.info.Name, err)
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer had our record of lease %s at release (it expired, was deleted, or another holder took the lease)", l.s.where, l.info.Name), lease.ErrNotHeld)
	}
	l.s.publishRelease(cctx, l.info.Name)
	return nil
}

// keepHeld is ReleaseHeld with a positive hold: the record, still carrying
// our ID, is set to expire hold from now instead of being deleted
// (hold.lua), so that nobody can take the lease before then and it frees
// itself without a process of ours. Waiters are woken with the release
// channel's message: they read the new, shorter PTTL and sleep until it runs
// out. It wraps lease.ErrNotHeld when the record is gone or another
// holder's.
func (rl *redisLease) keepHeld(ctx context.Context, hold time.Duration) error {
	s := rl.s
	until := time.Now().Add(hold).UTC().Format(time.RFC3339Nano)
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	n, err := holdScript().Run(cctx, s.client, []string{recordKey(rl.info.Name)}, rl.info.ID, storeopt.Millis(hold), until).Int64()
	if err != nil {
		return s.classify("release "+rl.info.Name, err)
	}
	if n != 1 {
		return lease.NewError(fmt.Sprintf("%s no longer had our record of lease %s at release (it expired, was deleted, or another holder took the lease)", s.where, rl.info.Name), lease.ErrNotHeld)
	}
	s.publishRelease(cctx, rl.info.Name)
	return nil
}

// ReleaseHeld gives the lease up with a hold (lease.Holding): at once when
// hold is not positive, otherwise as keepHeld says.
func (rl *redisLease) ReleaseHeld(ctx context.Context, hold time.Duration) error {
	return storeopt.ReleaseHeld(ctx, hold, rl.Release, rl.keepHeld)
}

var _ lease.Holding = (*redisLease)(nil)

// publishRelease tells waiters on the release channel. It is a hint: any
// failure is logged at debug level, and after a NOPERM (the user may not use
// the channel) the store stops trying.
func (s *Store) publishRelease(ctx context.Context, name string) {
	if s.noChannel.Load() {
		return
	}
	err := s.client.Publish(ctx, releaseChan(name), "released").Err()
	if err == nil {
		return
	}
	if redis.IsPermissionError(err) {
		s.noChannel.Store(true)
		s.log.Debug("no permission to publish on the release channel; waiters wake by TTL or polling (grant &leaderrun:* for instant handover)", "err", s.classify("publish", err))
		return
	}
	s.log.Debug("release notification not sent; waiters wake by TTL", "err", s.classify("publish", err))
}

// slogAdapter sends go-redis' internal log lines to slog at debug level.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Printf(ctx context.Context, format string, v ...any) {
	a.l.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
