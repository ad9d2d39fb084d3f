package etcdlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Standbys (lease.CandidateRegistry). Each waiting instance of lease NAME is
// one key
//
//	PREFIX+NAME:candidates/ID    JSON {holder, priority, since}
//
// attached to an etcd lease of the standby's own, so the key vanishes when
// the standby stops refreshing it (its process died, or it was cut off),
// counted by the cluster's clock. ':' is not in the lease-name alphabet, so
// no lease key is ever a candidate key and PREFIX+NAME:candidates/ holds
// the standbys of NAME only.
//
// A new registration is a Grant and one transaction that puts the key and
// counts the live standbys; a heartbeat is one keep-alive of the standby's
// etcd lease and a count (a key-only read). An expiry longer than the
// granted TTL (the crowd grew, so heartbeats are spaced further apart) is a
// new grant that the key moves to. Leave revokes the standby's etcd lease,
// which deletes its key at once. Listing reads the holder's key and the
// standbys in one transaction, plus the holder's remaining TTL.

// heartbeatsPerSecond is the budget of heartbeats of all the standbys of one
// lease together, as on Redis: each is two cheap requests (a keep-alive the
// leader answers from memory and a count), so 1,000 standbys add about 6
// requests/s to the cluster.
const heartbeatsPerSecond = 3

var _ lease.CandidateRegistry = (*Store)(nil)

// candidateKeys is the prefix of the standby keys of lease name.
func (s *Store) candidateKeys(name string) string { return s.key(name) + ":candidates/" }

// candRecord is a standby key's JSON value.
type candRecord struct {
	Holder   string    `json:"holder"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
}

// candLease is the etcd lease a standby key of ours is attached to.
type candLease struct {
	id   clientv3.LeaseID
	secs int64 // its granted TTL
}

// registrations are the standby keys this Store made, by key.
type registrations struct {
	mu   sync.Mutex
	keys map[string]candLease
}

func (r *registrations) get(key string) (candLease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cl, ok := r.keys[key]
	return cl, ok
}

func (r *registrations) set(key string, cl candLease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = make(map[string]candLease)
	}
	r.keys[key] = cl
}

func (r *registrations) take(key string) (candLease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cl, ok := r.keys[key]
	delete(r.keys, key)
	return cl, ok
}

// Join registers c for at least expiry (whole seconds, rounded up; etcd may
// raise a short one to its shortest lease), or refreshes its registration,
// and returns the number of live standbys of name.
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	prefix := s.candidateKeys(name)
	key := prefix + c.ID
	secs := max(int64((expiry+time.Second-1)/time.Second), 1)
	if cl, ok := s.regs.get(key); ok && cl.secs >= secs {
		n, err := s.refresh(cctx, name, prefix, cl.id)
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return n, err
		}
		// Lapsed (we were cut off for longer than expiry): register anew.
	}
	rec, err := json.Marshal(candRecord{Holder: c.Label, Priority: c.Priority, Since: c.Since.UTC()})
	if err != nil {
		return 0, err
	}
	var g *clientv3.LeaseGrantResponse
	err = s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		g, err = cli.Grant(ctx, secs)
		return err
	})
	if err != nil {
		return 0, s.classify("join standbys of "+name, err)
	}
	var tr *clientv3.TxnResponse
	err = s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		tr, err = cli.Txn(ctx).Then(
			clientv3.OpPut(key, string(rec), clientv3.WithLease(g.ID)),
			clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		return err
	})
	if err != nil {
		// The put may have happened, moving the key to the new lease:
		// revoke both, so that the next Join registers afresh rather than
		// keep an old lease alive with no key on it.
		s.revoke(cctx, g.ID)
		if old, ok := s.regs.take(key); ok {
			s.revoke(cctx, old.id)
		}
		return 0, s.classify("join standbys of "+name, err)
	}
	if old, ok := s.regs.get(key); ok {
		s.revoke(cctx, old.id) // the key is on the new lease now
	}
	s.regs.set(key, candLease{id: g.ID, secs: g.TTL})
	if len(tr.Responses) != 2 {
		return 0, fmt.Errorf("%s: join standbys of %s: the transaction answered %d results, want 2", s.cfg.where, name, len(tr.Responses))
	}
	return int(tr.Responses[1].GetResponseRange().GetCount()), nil
}

// refresh keeps the registration's etcd lease id alive and counts the
// standbys under prefix. It returns rpctypes.ErrLeaseNotFound itself when
// the lease lapsed.
func (s *Store) refresh(ctx context.Context, name, prefix string, id clientv3.LeaseID) (int, error) {
	err := s.do(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		return keepAliveOnce(ctx, cli, id)
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return 0, err
	}
	if err != nil {
		return 0, s.classify("join standbys of "+name, err)
	}
	var gr *clientv3.GetResponse
	err = s.do(ctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		gr, err = cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err
	})
	if err != nil {
		return 0, s.classify("join standbys of "+name, err)
	}
	return int(gr.Count), nil
}

// Leave removes the candidate id of name: it revokes the standby's etcd
// lease, which deletes its key (or deletes the key, when this Store did not
// make it). It returns at once and leaves from a goroutine the Store owns
// (Close waits for it, at most a call timeout): Acquire leaves right after
// winning the lease, and the child should not wait for a round trip that
// only tidies the list. A failure is logged at debug level; the
// registration then lapses with its etcd lease.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	key := s.candidateKeys(name) + id
	leave := func(ctx context.Context) error {
		cctx, cancel := s.callCtx(ctx)
		defer cancel()
		if cl, ok := s.regs.take(key); ok {
			err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) error {
				_, err := cli.Revoke(ctx, cl.id)
				return err
			})
			if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil
			}
			s.log.Debug("revoking a standby's etcd lease failed; deleting its key", "err", s.classify("leave standbys of "+name, err))
		}
		err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.Delete(ctx, key)
			return err
		})
		return s.classify("leave standbys of "+name, err)
	}
	s.bg.Go(func() {
		if err := leave(context.WithoutCancel(ctx)); err != nil {
			s.log.Debug("leaving the standbys failed; the registration lapses by itself", "err", err)
		}
	})
	return nil
}

// Candidates returns the live standbys of name in takeover order and the
// holder (nil when free, ID left out, with its remaining TTL): one
// transaction reads the holder's key and the standby keys, then the
// holder's etcd lease is asked for its TTL. The holder's own candidacy, if
// it is still registered, is left out, and so are keys that are not our
// JSON. Remaining is left unknown (0): it would cost a request per standby.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	prefix := s.candidateKeys(name)
	var tr *clientv3.TxnResponse
	err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		tr, err = cli.Txn(ctx).Then(
			clientv3.OpGet(s.key(name)),
			clientv3.OpGet(prefix, clientv3.WithPrefix()),
		).Commit()
		return err
	})
	if err != nil {
		return nil, nil, s.classify("standbys of "+name, err)
	}
	if len(tr.Responses) != 2 {
		return nil, nil, fmt.Errorf("%s: standbys of %s: the transaction answered %d results, want 2", s.cfg.where, name, len(tr.Responses))
	}
	var (
		h        *lease.Holder
		holderID string
	)
	if kvs := tr.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		hh := holderOf(name, kvs[0])
		holderID, hh.ID = hh.ID, ""
		if kvs[0].Lease != 0 {
			var ttl *clientv3.LeaseTimeToLiveResponse
			err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
				ttl, err = cli.TimeToLive(ctx, clientv3.LeaseID(kvs[0].Lease))
				return err
			})
			if err != nil {
				return nil, nil, s.classify("standbys of "+name, err)
			}
			if ttl.TTL > 0 {
				hh.Remaining = time.Duration(ttl.TTL) * time.Second
			}
		}
		h = &hh
	}
	var cs []lease.Candidate
	for _, kv := range tr.Responses[1].GetResponseRange().GetKvs() {
		id := string(kv.Key[len(prefix):])
		if id == "" || (holderID != "" && id == holderID) {
			continue
		}
		var r candRecord
		if json.Unmarshal(kv.Value, &r) != nil {
			continue // not ours: skip rather than fail the listing
		}
		cs = append(cs, lease.Candidate{ID: id, Label: r.Holder, Priority: r.Priority, Since: r.Since})
	}
	lease.SortCandidates(cs)
	return cs, h, nil
}

// CandidateTiming: heartbeats within heartbeatsPerSecond, at least a second
// apart; δ covers a better standby woken by its watch of the lease's key
// (or, with the watch down, by the holder's lease running out, plus jitter),
// one listing and one attempt (a grant and a transaction), with room for a
// loaded host.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	return lease.CandidateTiming{Heartbeat: true, PerSecond: heartbeatsPerSecond, MinInterval: time.Second, Step: 200 * time.Millisecond}
}
