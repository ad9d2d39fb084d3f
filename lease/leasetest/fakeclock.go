package leasetest

import (
	"context"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Clock = (*FakeClock)(nil)

// FakeClock is a manually advanced Clock for deterministic timing tests.
// The zero value reads 0 and is ready to use.
type FakeClock struct {
	mu   sync.Mutex
	cond *sync.Cond
	now  time.Duration
	// due holds the deadline of every goroutine blocked in SleepUntil.
	due map[*time.Duration]struct{}
}

func (c *FakeClock) init() {
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
		c.due = map[*time.Duration]struct{}{}
	}
}

// Now returns the fake reading.
func (c *FakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns once every sleeper whose
// time came has woken up (it may have started a new sleep since).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	c.now += d
	c.cond.Broadcast()
	for c.anyDue() {
		c.cond.Wait()
	}
}

func (c *FakeClock) anyDue() bool {
	for t := range c.due {
		if *t <= c.now {
			return true
		}
	}
	return false
}

// Sleepers returns how many goroutines are blocked in SleepUntil; tests use it
// to wait until the code under test has gone to sleep before advancing.
func (c *FakeClock) Sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.due)
}

// SleepUntil blocks until Advance has moved the clock to t or ctx is done.
func (c *FakeClock) SleepUntil(ctx context.Context, t time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.now >= t {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.cond.Broadcast()
	})
	defer stop()
	deadline := t
	c.due[&deadline] = struct{}{}
	defer func() {
		delete(c.due, &deadline)
		c.cond.Broadcast()
	}()
	for c.now < t && ctx.Err() == nil {
		c.cond.Wait()
	}
	return ctx.Err()
}
