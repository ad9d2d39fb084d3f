package filelease

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"golang.org/x/sys/unix"
)

// Wait blocks until a descriptor opened for writing on the lock file closes
// (the holder released or died), the file is replaced, ctx ends, or
// PollInterval (jittered) passes.
func (s *Store) Wait(ctx context.Context, name string, _ *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path := s.Path(name)
	// One Wait at a time reads the shared instance; a concurrent Wait on the
	// same Store (not leaderrun's case) falls back to polling.
	if !s.notifyMu.TryLock() {
		return sleep(ctx, jitter(PollInterval/4))
	}
	defer s.notifyMu.Unlock()
	in, err := s.watcher()
	if err != nil {
		// No inotify instance to be had: beyond fs.inotify.max_user_instances
		// (128 by default) processes of one user, the rest poll, and try
		// for an instance again at each look.
		return s.pollUntilFree(ctx, path, true)
	}
	return s.waitOn(ctx, in, path)
}

// waitOn is Wait with the inotify instance in: it watches the lock file at
// path and sleeps on its events.
func (s *Store) waitOn(ctx context.Context, in *os.File, path string) error {
	// Events queued while nobody waited are stale: drop them. The check
	// below covers a release that happened in the meantime.
	drain(in)
	wd, err := unix.InotifyAddWatch(int(in.Fd()), path, waitMask)
	if errors.Is(err, unix.ENOENT) {
		return nil // the lock file went: the caller's attempt makes it again
	}
	if err != nil {
		// Beyond fs.inotify.max_user_watches, or a path that is no
		// regular file (TryAcquire says what is wrong with it).
		return s.pollUntilFree(ctx, path, false)
	}
	// The holder may have gone between the caller's attempt and the watch.
	free, holdEnd, _ := s.looksFree(path)
	if free {
		return nil
	}
	if f := waitArmed.Load(); f != nil {
		(*f)()
	}
	return s.sleepOnEvents(ctx, in, wd, path, holdEnd)
}

// wakeAt is when a waiter looks again without an event: after interval,
// jittered, or just after a hold ends if that is sooner (a hold ends
// without any event).
func wakeAt(interval time.Duration, holdEnd time.Time) time.Time {
	deadline := time.Now().Add(jitter(interval))
	if !holdEnd.IsZero() && holdEnd.Before(deadline) {
		deadline = holdEnd.Add(time.Millisecond)
	}
	return deadline
}

// sleepOnEvents is Wait's sleep on the inotify instance in: it returns when
// the watch wd of the lock file at path reports an event (a descriptor
// opened for writing closed, the file went), ctx ends, or a look at the
// fallback deadline finds the lease free.
func (s *Store) sleepOnEvents(ctx context.Context, in *os.File, wd int, path string, holdEnd time.Time) error {
	// The fallback deadline is set once, before cancellation can move it into
	// the past, so a cancel is never overwritten.
	_ = in.SetReadDeadline(wakeAt(PollInterval, holdEnd))
	stop := context.AfterFunc(ctx, func() { _ = in.SetReadDeadline(time.Unix(1, 0)) })
	// A callback still running after stop can only leave a past deadline
	// for the next Wait: a spurious wake-up, never a missed one.
	defer stop()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	idle := PollInterval
	for {
		n, err := in.Read(buf)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			// The fallback interval passed without an event. Look; if the
			// lease is still held, sleep on without waking the caller: an
			// idle standby costs one probe per interval, not a round of
			// Acquire (which lists every other standby: with N standbys,
			// N² work per interval).
			free, holdEnd, err := s.looksFree(path)
			if free || err != nil {
				return nil
			}
			// The lease stays held: look less often, up to idlePollMax
			// (a release by leaderrun wakes us at once by its event; only
			// a holder that sends none, flock(1) or an old version, is
			// noticed this late).
			idle = min(2*idle, idlePollMax)
			deadline := wakeAt(idle, holdEnd)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			_ = in.SetReadDeadline(deadline)
			if ctx.Err() != nil { // cancelled while re-arming: its past deadline may be overwritten
				return ctx.Err()
			}
			continue
		}
		hit, count := eventFor(buf[:n], wd)
		s.events.Add(int64(count))
		if hit {
			// A descriptor of the holder closed. The kernel may signal the
			// close a moment before it drops the lock (a crashed holder), so
			// look again briefly before going back to sleep.
			return s.settle(ctx, path)
		}
	}
}

// pollUntilFree is Wait without inotify: it looks after PollInterval,
// then less often while the lease stays held, up to idlePollMax (jittered,
// as a sleep on events does), and returns only when the lease looks free, a
// hold has ended or ctx is done. An idle standby then costs what one that
// has an inotify instance costs, and never a round of Acquire, which lists
// every other standby (with N standbys, N² work per interval). With
// tryNotify it tries for an inotify instance again at each look (another
// process of the user may have freed one) and then sleeps on events.
func (s *Store) pollUntilFree(ctx context.Context, path string, tryNotify bool) error {
	idle := PollInterval
	for {
		d := jitter(idle)
		idle = min(2*idle, idlePollMax)
		free, holdEnd, err := s.looksFree(path)
		if free || err != nil {
			return nil
		}
		if !holdEnd.IsZero() && time.Until(holdEnd) < d {
			d = time.Until(holdEnd) + time.Millisecond
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
		if tryNotify {
			if in, err := s.watcher(); err == nil {
				return s.waitOn(ctx, in, path)
			}
		}
	}
}

// settle waits up to ~200ms for the lock on path to be dropped after an
// event: a dying holder's kernel closes its write descriptor (the event) and
// its lock descriptor (the release) in separate steps.
func (s *Store) settle(ctx context.Context, path string) error {
	for d := 100 * time.Microsecond; d < 200*time.Millisecond; d *= 2 {
		if free, _, err := s.looksFree(path); free || err != nil {
			return nil
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// looksFree reports whether the lock on path looks free, by probe, and not
// kept taken by a hold; holdEnd is when a hold that keeps it taken ends.
func (s *Store) looksFree(path string) (free bool, holdEnd time.Time, _ error) {
	fd, err := unix.Open(path, unix.O_RDONLY|openFlags, 0)
	if err != nil {
		return true, time.Time{}, nil // let TryAcquire say what is wrong
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	r, _ := readRecord(f)
	if r.holdLeft(time.Now()) > 0 {
		return false, r.HeldUntil, nil
	}
	held, err := probe(f)
	return !held, time.Time{}, err
}

// probe reports whether someone holds the lock on f.
// Holders of this version keep an OFD read lock next to their flock, and
// F_OFD_GETLK tests it without taking any lock, so probing a held lease
// never gets in an acquirer's way. Otherwise (the lease looks free, or its
// holder is of an older version, or not leaderrun at all) a shared flock
// held for an instant checks; acquirers retry past such a lock
// (lockExclusive).
func probe(f *os.File) (bool, error) {
	// Below probeMark: other probes' marks are not holders.
	lk := unix.Flock_t{Type: unix.F_WRLCK, Len: probeMark}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, classified(err, "cannot probe the lock of "+f.Name())
	}
	if lk.Type != unix.F_UNLCK {
		return true, nil
	}
	// No holder of this version. A shared flock held for an instant tells
	// whether anyone else holds the file exclusively: a holder of an older
	// version (whose record says held), or a process that is not leaderrun
	// at all (flock(1) of another user on a shared lock file; its lock
	// shows in no record). Acquirers retry past the instant
	// (lockExclusive).
	// The shared flock is marked as a probe's (probeMark) for as long as
	// it is held, so that acquirers wait for it instead of reporting held.
	fd := int(f.Fd())
	mark := unix.Flock_t{Type: unix.F_RDLCK, Start: probeMark, Len: 1}
	_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &mark) // best effort: unmarked, it is an old probe
	defer func() {
		mark.Type = unix.F_UNLCK
		_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &mark)
	}()
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return true, nil
		}
		return false, classified(err, "cannot probe the lock of "+f.Name())
	}
	_ = unix.Flock(fd, unix.LOCK_UN)
	return false, nil
}

// probing reports whether a probe's mark (probeMark) is on the file open
// as fd: a probe holds, or is about to take, a shared flock. (A holder's
// OFD lock covers the mark too; the next exclusive attempt tells.)
func probing(fd int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: probeMark, Len: 1}
	return unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk) == nil && lk.Type != unix.F_UNLCK
}

// drain discards queued events without blocking.
func drain(in *os.File) {
	_ = in.SetReadDeadline(time.Unix(1, 0))
	buf := make([]byte, 4096)
	for {
		if _, err := in.Read(buf); err != nil {
			return
		}
	}
}

// eventFor reports whether buf holds an event of watch wd (events of
// watches of earlier Waits on other lock files, or on a replaced one, are
// not this Wait's), and how many events it holds.
func eventFor(buf []byte, wd int) (hit bool, count int) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); count++ {
		ev := (*unix.InotifyEvent)(unsafePointer(buf[off:]))
		hit = hit || int(ev.Wd) == wd
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	return hit, count
}

func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d) }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
