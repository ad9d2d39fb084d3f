package kubelease

import (
	"context"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/wakeup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

var _ lease.ChangeWatcher = (*Store)(nil)

// WatchChanges watches, with the API's watch, the lease's object and its
// standbys' objects (a label selector), from the cluster's revision at a
// read made before it returns: every write to them wakes Next. What
// nobody writes — a holder that stopped renewing, a standby that stopped
// refreshing — happens at times the caller's last reading tells (the
// holder's and each standby's Remaining), and Next wakes then. A watch the
// API server ends is started again at the next Next, which returns at once
// (a spurious wake: the caller reads again).
func (s *Store) WatchChanges(ctx context.Context, name string) (lease.Changes, error) {
	// The watches outlive ctx, which bounds this call only.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &changes{s: s, name: name, wctx: wctx, cancel: cancel}
	if err := c.start(ctx); err != nil {
		cancel()
		return nil, err
	}
	return c, nil
}

// changes is one WatchChanges: the two watches, nil when ended.
type changes struct {
	s          *Store
	name       string
	wctx       context.Context // the watches', cancelled by Close
	cancel     context.CancelFunc
	obj, cands watch.Interface
}

// start reads the cluster's revision and watches both from it.
func (c *changes) start(ctx context.Context) error {
	cctx, cancel := c.s.callCtx(ctx)
	defer cancel()
	_, rev, err := c.s.read(cctx, "watch "+c.name, c.name)
	if err != nil {
		return err
	}
	from := strconv.FormatUint(rev, 10)
	obj, err := c.s.leases.Watch(c.wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + objName(c.name), ResourceVersion: from})
	if err != nil {
		return c.s.classify("watch", "watch "+c.name, err)
	}
	cands, err := c.s.leases.Watch(c.wctx, metav1.ListOptions{LabelSelector: standbySelector(c.name), ResourceVersion: from})
	if err != nil {
		obj.Stop()
		return c.s.classify("watch", "watch "+c.name, err)
	}
	c.obj, c.cands = obj, cands
	return nil
}

// Next returns at an event of either watch, when the holder or a standby
// would lapse by the caller's last reading, or when ctx ends.
func (c *changes) Next(ctx context.Context, h *lease.Holder, cands []lease.Candidate) error {
	if c.obj == nil {
		if err := c.start(ctx); err != nil {
			c.s.log.Debug("cannot watch the lease again; trying again shortly", "name", c.name, "err", err)
			return wakeup.Sleep(ctx, noReadPoll, nil)
		}
		return ctx.Err() // look again now: something may have changed unwatched
	}
	var timer <-chan time.Time // nil: no time left known
	if t := wakeup.Soonest(h, cands, epsilon); t != nil {
		defer t.Stop()
		timer = t.C
	}
	var ok bool
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer:
		return nil
	case _, ok = <-c.obj.ResultChan():
	case _, ok = <-c.cands.ResultChan():
	}
	if !ok {
		c.stop()
	}
	return nil
}

func (c *changes) stop() {
	if c.obj != nil {
		c.obj.Stop()
		c.cands.Stop()
		c.obj, c.cands = nil, nil
	}
}

// Close ends the watches.
func (c *changes) Close() error {
	c.stop()
	c.cancel()
	return nil
}
