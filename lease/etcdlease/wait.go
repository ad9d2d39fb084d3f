package etcdlease

import (
	"context"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Waiting (docs/design.md, waiting for the lease). A waiter reads the key and watches it from the next
// revision: the holder's release (the key deleted), its lease expiring (etcd
// deletes the key) and anything else that changes the key wake the waiter at
// once, without polling. The watch is checked with a progress request every
// progressEvery; when it ends (compaction, a member without a leader, the
// client closing) or stops answering (a member frozen, the connection being
// re-made), the waiter falls back to sleeping until the holder's etcd lease
// runs out, while still listening to the watch in case it recovers.

// noTTLPoll is how long a waiter sleeps when it cannot read the key or its
// lease's remaining TTL (etcd unreachable).
const noTTLPoll = 2 * time.Second

// progressEvery is how often a waiter asks its watch stream for a progress
// notification, to tell a live watch from a silent one. The answer comes from
// the member, with no Raft round, so it costs etcd nothing worth counting.
// (A variable only so that the tests can shorten it.)
var progressEvery = 5 * time.Second

// Wait blocks until the lease may have become free: its key changed or was
// deleted, or, when the watch is not working, the holder's lease ran out. It
// returns nil to mean "try again", or ctx's error. Store failures never end
// it with an error: it sleeps a short while and says "try again", so the
// caller's next TryAcquire reports the failure.
func (s *Store) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cli, gr, err := s.readKey(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Debug("cannot read the lease's key; trying again shortly", "name", name, "err", err)
		return wakeup.Sleep(ctx, pollFor(held), nil)
	}
	if len(gr.Kvs) == 0 {
		return nil // free now
	}
	w := &keyWait{s: s, name: name, held: held, holderLease: clientv3.LeaseID(gr.Kvs[0].Lease)}
	defer w.stop()
	return w.watch(ctx, cli, s.key(name), gr.Header.Revision+1)
}

// readKey reads the lease's key, and returns the client it read it with.
func (s *Store) readKey(ctx context.Context, name string) (*clientv3.Client, *clientv3.GetResponse, error) {
	gctx, cancel := s.callCtx(ctx)
	defer cancel()
	var (
		cli *clientv3.Client
		gr  *clientv3.GetResponse
	)
	err := s.do(gctx, func(ctx context.Context, c *clientv3.Client) (err error) {
		cli = c
		gr, err = c.Get(ctx, s.key(name))
		return err
	})
	if err != nil {
		return nil, nil, s.classify("wait "+name, err)
	}
	return cli, gr, nil
}

// keyWait is one Wait on a held key: the watch, and the fallback timer
// armed when the watch ends or goes silent.
type keyWait struct {
	s           *Store
	name        string
	held        *lease.HeldError
	holderLease clientv3.LeaseID
	timer       *time.Timer
	fallback    <-chan time.Time // fires when the holder's lease has run out
}

// arm starts the fallback: wake when the holder's lease runs out.
func (w *keyWait) arm(ctx context.Context, why string) {
	if w.timer != nil {
		return
	}
	d := w.s.remaining(ctx, w.holderLease, w.held)
	w.s.log.Debug(why+"; waking when the holder's lease runs out", "name", w.name, "in", d)
	w.timer = time.NewTimer(d + wakeup.Jitter(d))
	w.fallback = w.timer.C
}

func (w *keyWait) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// watch waits for a change of key from revision rev on, checking the
// watch with a progress request every progressEvery, or for the fallback.
func (w *keyWait) watch(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	// Require a leader: a member cut off from the majority ends the watch
	// (then the fallback) instead of keeping it open and silent.
	wctx, wcancel := context.WithCancel(withToken(clientv3.WithRequireLeader(ctx), w.s.currentToken()))
	defer wcancel()
	wch := cli.Watch(wctx, key, clientv3.WithRev(rev))
	hb := time.NewTicker(progressEvery)
	defer hb.Stop()
	pending := false // a progress request is unanswered
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, ok := <-wch:
			if !ok || resp.Canceled || resp.Err() != nil {
				wch = nil
				w.arm(ctx, "the watch ended")
				continue
			}
			if len(resp.Events) > 0 {
				return nil
			}
			pending = false // a progress notification: the watch is alive
		case <-hb.C:
			if wch == nil || w.fallback != nil {
				continue
			}
			if pending {
				w.arm(ctx, "the watch does not answer")
				continue
			}
			rctx, rcancel := w.s.callCtx(wctx)
			err := cli.RequestProgress(rctx)
			rcancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				w.arm(ctx, "the watch does not answer")
				continue
			}
			pending = true
		case <-w.fallback:
			return nil
		}
	}
}

// remaining is how long the holder's etcd lease has left; 0 when it is
// gone, and a short poll when it cannot be read.
func (s *Store) remaining(ctx context.Context, id clientv3.LeaseID, held *lease.HeldError) time.Duration {
	if id == 0 {
		return pollFor(held) // a key without a lease (written by hand): not ours to expire
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var ttl *clientv3.LeaseTimeToLiveResponse
	err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		ttl, err = cli.TimeToLive(ctx, id)
		return err
	})
	if err != nil {
		s.log.Debug("cannot read the holder's lease TTL", "err", s.classify("wait", err))
		return pollFor(held)
	}
	if ttl.TTL <= 0 {
		return 0
	}
	return time.Duration(ttl.TTL) * time.Second
}

// pollFor is how long to sleep when nothing better is known.
func pollFor(held *lease.HeldError) time.Duration {
	if held != nil && held.By.TTL > 0 && held.By.TTL < noTTLPoll {
		return held.By.TTL
	}
	return noTTLPoll
}
