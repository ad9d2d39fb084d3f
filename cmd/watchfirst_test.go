package cmd

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// slowReads answers its first reads as a store that did not answer in
// time (or with err, when set), then as the store it wraps; answered is
// closed at the first read it answers.
type slowReads struct {
	*leasetest.MemStore
	fails    atomic.Int32
	err      error
	answered chan struct{}
	once     sync.Once
}

func (s *slowReads) failing() error {
	if s.fails.Add(-1) >= 0 {
		return s.err
	}
	s.once.Do(func() { close(s.answered) })
	return nil
}

func (s *slowReads) Status(ctx context.Context, name string) (*lease.Holder, error) {
	if err := s.failing(); err != nil {
		return nil, err
	}
	return s.MemStore.Status(ctx, name)
}

func (s *slowReads) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	if err := s.failing(); err != nil {
		return nil, nil, err
	}
	return s.MemStore.Candidates(ctx, name)
}

// watchSlow runs `watch --once --interval 10ms w` on a store whose first
// reads fail with err, and takes lease w once the store has answered.
func watchSlow(t *testing.T, err error) (code int, stdout, stderr string) {
	t.Helper()
	s := &slowReads{MemStore: &leasetest.MemStore{}, err: err, answered: make(chan struct{})}
	s.fails.Store(4)
	useStore(t, "slowread", s)
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := runEnv(t, nil, "watch", "--store", "slowread://", "--once", "--interval", "10ms", "w")
		done <- result{c, o, e}
	}()
	var r result
	select {
	case r = <-done:
	case <-s.answered:
		if _, err := s.MemStore.TryAcquire(context.Background(), lease.Request{Name: "w", Label: "h1", ID: lease.NewID(), TTL: time.Minute}); err != nil {
			t.Error(err)
		}
		r = <-done
	}
	return r.code, r.out, r.errOut
}

// A watch whose first reads are not answered in time keeps asking, with one
// warning, instead of exiting 125: a slow store is a wait (beside stress-ng
// an Azurite took longer than the call timeout to answer a watch's first
// read). An error that is not a store's unavailability still ends it at
// once.
func TestWatchFirstReadSlowIsAWait(t *testing.T) {
	code, out, errOut := watchSlow(t, lease.NewError("no answer from the test store in time (status w)", lease.ErrUnavailable))
	if code != 0 || !strings.Contains(out, "held by h1") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the acquisition and 0", code, out, errOut)
	}
	if n := strings.Count(errOut, "no answer from the store yet; still trying"); n != 1 {
		t.Errorf("%d warnings; want 1:\n%s", n, errOut)
	}

	code, _, errOut = watchSlow(t, lease.NewError("the test store refused: permission denied", lease.ErrConfig))
	if code != 125 || !strings.Contains(errOut, "permission denied") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q; want 125 in one line", code, errOut)
	}
}
