package lease

import (
	"context"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Clock is the time source of every safety deadline. Its readings are
// durations since an arbitrary origin and must keep counting while the
// system is suspended (docs/design.md, safety rule 2): Go's monotonic clock does not.
type Clock interface {
	// Now returns the current reading.
	Now() time.Duration
	// SleepUntil blocks until the reading is at least t or ctx is done; it
	// returns ctx.Err() in the latter case.
	SleepUntil(ctx context.Context, t time.Duration) error
}

// BootClock is the real Clock: CLOCK_BOOTTIME, with sleeps on a timerfd of
// the same clock, so a deadline that passed during a suspend fires the moment
// the system resumes. The zero value is ready to use.
type BootClock struct{}

// Now reads CLOCK_BOOTTIME.
func (BootClock) Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("lease: clock_gettime(CLOCK_BOOTTIME): " + err.Error()) // Linux ≥ 2.6.39 always has it
	}
	return time.Duration(ts.Nano())
}

// SleepUntil sleeps on an absolute CLOCK_BOOTTIME timerfd.
func (c BootClock) SleepUntil(ctx context.Context, t time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.Now() >= t {
		return nil
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return c.sleepPolling(ctx, t)
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(t))}
	if err := unix.TimerfdSettime(fd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		_ = unix.Close(fd)
		return c.sleepPolling(ctx, t)
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var buf [8]byte
	if _, err := f.Read(buf[:]); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.sleepPolling(ctx, t)
	}
	return nil
}

// sleepPolling is the fallback when no timerfd can be had: short monotonic
// sleeps, re-reading the boot clock after each.
func (c BootClock) sleepPolling(ctx context.Context, t time.Duration) error {
	for {
		left := t - c.Now()
		if left <= 0 {
			return nil
		}
		timer := time.NewTimer(min(left, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

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
