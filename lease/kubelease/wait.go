package kubelease

import (
	"context"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// noReadPoll is how long a waiter sleeps when it cannot read the record
// (the API server unreachable).
const noReadPoll = wakeup.UnreadPoll

// Wait blocks until the lease may have become free: the Lease object
// changed or was deleted (an API watch from the version read, so a release
// wakes the waiter at once), or the record has stayed unchanged for its
// whole lease duration on this Store's boot clock (a crashed holder), or a
// hold's end passed. It returns nil to mean "try again", or ctx's error.
// Store failures never end it with an error: it sleeps a short while and
// says "try again", so the caller's next TryAcquire reports the failure.
func (s *Store) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rctx, cancel := s.callCtx(ctx)
	cur, rev, err := s.read(rctx, "wait "+name, name)
	cancel()
	if err != nil {
		d, err := wakeup.Unread(ctx, s.log, name, held, err)
		if err != nil {
			return err
		}
		return wakeup.Sleep(ctx, d, nil)
	}
	if cur == nil {
		return nil
	}
	r := readRecord(cur)
	if s.free(name, cur, r) {
		return nil
	}
	d := s.expiresAt(name, cur, r) - s.clock.Now()
	if !r.heldUntil.IsZero() {
		d = min(d, time.Until(r.heldUntil))
	}
	wake, stop := s.watchOnce(ctx, name, rev)
	defer stop()
	return wakeup.Sleep(ctx, max(d, 0), wake)
}

// watchOnce watches name's object from revision rev and closes the
// returned channel at the first event (a change, a deletion, the watch
// ending or failing: all mean "look again"). stop ends the watch and waits
// for its goroutine. When the watch cannot be started, the channel is nil
// (never closed): the waiter wakes by time alone.
func (s *Store) watchOnce(ctx context.Context, name string, rev uint64) (<-chan struct{}, func()) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := s.leases.Watch(wctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=" + objName(name),
		ResourceVersion: strconv.FormatUint(rev, 10),
	})
	if err != nil {
		cancel()
		s.log.Debug("cannot watch the lease's record; waiting for its expiry", "name", name, "err", s.classify("watch", "wait "+name, err))
		return nil, func() {}
	}
	wake := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-w.ResultChan():
			close(wake)
		case <-wctx.Done():
		}
	}()
	return wake, func() {
		cancel()
		w.Stop()
		<-done
	}
}
