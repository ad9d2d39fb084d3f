package lease

import "github.com/leaderrun/leaderrun/internal/boottime"

// Clock is the time source of every safety deadline. Its readings are
// durations since an arbitrary origin and must keep counting while the
// system is suspended (docs/design.md, safety rule 2): Go's monotonic clock
// does not. It is boottime.Clock, shared with package runner.
type Clock = boottime.Clock

// BootClock is the real Clock: CLOCK_BOOTTIME, with sleeps on a timerfd of
// the same clock, so a deadline that passed during a suspend fires the
// moment the system resumes. The zero value is ready to use.
type BootClock = boottime.Boot
