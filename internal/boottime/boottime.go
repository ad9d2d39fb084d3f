// Package boottime is the clock of every safety deadline: CLOCK_BOOTTIME,
// which keeps counting while the system is suspended (docs/design.md,
// safety rule 2), as Go's monotonic clock does not. Package lease (its
// deadlines) and package runner (the guard's) both read it; it imports
// nothing of the module.
package boottime

import (
	"context"
	"os"
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

// Boot is the real Clock: CLOCK_BOOTTIME, with sleeps on a timerfd of
// the same clock, so a deadline that passed during a suspend fires the moment
// the system resumes. The zero value is ready to use.
type Boot struct{}

// Now reads CLOCK_BOOTTIME.
func (Boot) Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("boottime: clock_gettime(CLOCK_BOOTTIME): " + err.Error()) // Linux ≥ 2.6.39 always has it
	}
	return time.Duration(ts.Nano())
}

// SleepUntil sleeps on an absolute CLOCK_BOOTTIME timerfd.
func (c Boot) SleepUntil(ctx context.Context, t time.Duration) error {
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
func (c Boot) sleepPolling(ctx context.Context, t time.Duration) error {
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
