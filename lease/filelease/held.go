package filelease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// fileLease is one held lock. Besides lease.Lease it has
//
//	Lost() <-chan struct{}
//
// a channel closed the moment the lock file is found deleted, moved or
// replaced (an inotify watch on the locked inode, for IN_DELETE_SELF,
// IN_MOVE_SELF and IN_ATTRIB, then the same check Renew makes), so a keeper
// can stop the child at once instead of at its next renewal. The watch is
// armed watchDelay (100ms) after the acquisition, with a check that catches
// a change made before. The channel is never closed by Release.
//
// Release drops the lock explicitly (flock LOCK_UN and the OFD lock), so a
// duplicate of the lock descriptor held elsewhere does not keep the lease.
type fileLease struct {
	path string
	mu   sync.Mutex
	// lockf holds the flock; rw writes the record, and its close wakes
	// waiters. Both are nil once released.
	lockf *os.File
	rw    *os.File
	rec   record
	// granted is the clock the token was minted at (Holder.Granted).
	granted time.Time

	lost     chan struct{} // closed by markLost
	lostOnce sync.Once

	// The watch goroutine (watchWG) arms an inotify instance (watch, under
	// mu) after watchDelay, unless stopped (under mu) first.
	watch    *os.File
	stopped  bool
	stopC    chan struct{}
	watchWG  sync.WaitGroup
	stopOnce sync.Once
}

func (l *fileLease) Info() lease.Holder {
	h := l.rec.holder()
	h.Granted = l.granted
	return h
}

// Lost returns a channel closed when the lock file is deleted, moved away or
// replaced while the lease is held: the lease is then lost, and Renew says
// so. It is never closed otherwise (not by Release).
func (l *fileLease) Lost() <-chan struct{} { return l.lost }

func (l *fileLease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// watchMask: a deletion (the link count drops, then the inode goes), a
// rename of the file, or a rename over it (the link count drops).
const watchMask = unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ATTRIB

// watchDelay is how long a lease is held before its watch is armed; a check
// when it is armed covers the time before. Removing an inotify watch costs
// the process an SRCU grace period in the kernel (about 10ms, paid at Release
// or at exit), which a job that ends within watchDelay does not pay. Tests
// set it to 0.
var watchDelay = 100 * time.Millisecond

// afterCheck, when set (by tests), is called after each check the watch
// makes, including the one when it is armed.
var afterCheck atomic.Pointer[func()]

// startWatch starts the watch goroutine; stopWatch ends it.
func (l *fileLease) startWatch() {
	l.stopC = make(chan struct{})
	l.watchWG.Add(1)
	go l.watchLoop(watchDelay)
}

// watchLoop arms the watch after watchDelay, then checks ownership on every
// event. It watches /proc/self/fd/N, which names exactly the inode we
// locked; where /proc is missing it watches the path (without following a
// link), and the check after arming covers a replacement in between. Without
// inotify the lease still learns of a replacement at its next Renew.
func (l *fileLease) watchLoop(delay time.Duration) {
	defer l.watchWG.Done()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-l.stopC:
			t.Stop()
			return
		case <-t.C:
		}
	}
	l.mu.Lock()
	if l.stopped || l.lockf == nil {
		l.mu.Unlock()
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err == nil {
		if _, err = unix.InotifyAddWatch(fd, fmt.Sprintf("/proc/self/fd/%d", l.lockf.Fd()), watchMask); err != nil {
			_, err = unix.InotifyAddWatch(fd, l.path, watchMask|unix.IN_DONT_FOLLOW)
		}
		if err != nil {
			_ = unix.Close(fd)
		} else {
			l.watch = os.NewFile(uintptr(fd), "inotify "+l.path)
		}
	}
	in := l.watch
	l.mu.Unlock()
	buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		l.mu.Lock()
		held := l.lockf != nil
		if held {
			err = l.owned()
		}
		l.mu.Unlock()
		if errors.Is(err, lease.ErrLost) {
			l.markLost()
		}
		if f := afterCheck.Load(); f != nil {
			(*f)()
		}
		if in == nil || !held || errors.Is(err, lease.ErrLost) {
			return
		}
		if _, err := in.Read(buf); err != nil {
			return // closed by stopWatch
		}
	}
}

// stopWatch ends the watch and waits for its goroutine. Closing an inotify
// instance waits for the kernel (an SRCU grace period), so Release calls it
// only after the lock is dropped and waiters are woken.
func (l *fileLease) stopWatch() {
	l.stopOnce.Do(func() {
		if l.stopC == nil {
			return
		}
		l.mu.Lock()
		l.stopped = true
		in := l.watch
		l.mu.Unlock()
		close(l.stopC)
		if in != nil {
			_ = in.Close()
		}
		l.watchWG.Wait()
	})
}

// Renew checks that the path still names our locked inode and that the
// record is still ours: a replaced, removed or rewritten file means lost.
func (l *fileLease) Renew(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockf == nil {
		return newError(lease.ErrNotHeld, nil, "lease "+l.rec.Name+" was already released")
	}
	err := l.owned()
	if errors.Is(err, lease.ErrLost) {
		l.markLost()
	}
	return err
}

// owned checks that the path still names our locked inode and that the
// record still carries our ID; l.mu must be held.
func (l *fileLease) owned() error {
	same, err := sameFile(l.lockf, l.path)
	if err != nil {
		return classified(err, "cannot check lock file "+l.path)
	}
	if !same {
		return newError(lease.ErrLost, nil, "lock file "+l.path+" was replaced or removed")
	}
	r, err := readRecord(l.rw)
	if err != nil || r.ID != l.rec.ID {
		return newError(lease.ErrLost, nil, "lock file "+l.path+" was rewritten by someone else")
	}
	return nil
}

// Release marks the record free (keeping the counter), drops the locks
// explicitly (the OFD read lock, then flock(LOCK_UN)), so that a duplicate of
// the lock descriptor still open elsewhere cannot delay the handover, and
// then closes the write descriptor, whose close wakes waiters after the lock
// is already gone.
func (l *fileLease) Release(ctx context.Context) error { return l.release(0) }

var _ lease.Holding = (*fileLease)(nil)

// ReleaseHeld releases the lease as Release does, but writes the end of the hold,
// hold from now by the wall clock, into the record: acquirers treat the
// lease as taken until then (and waiters wake then), status shows it. The
// hold follows the wall clock of the machine, so a clock stepped forward
// ends it early and one stepped back makes it last longer.
func (fl *fileLease) ReleaseHeld(_ context.Context, hold time.Duration) error {
	return fl.release(hold)
}

// release releases the lease; a positive hold keeps it taken for that long
// from now.
func (l *fileLease) release(hold time.Duration) error {
	defer l.stopWatch()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockf == nil {
		return newError(lease.ErrNotHeld, nil, "lease "+l.rec.Name+" was already released")
	}
	defer func() {
		_ = unix.FcntlFlock(l.lockf.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_UNLCK})
		_ = unix.Flock(int(l.lockf.Fd()), unix.LOCK_UN)
		l.lockf.Close()
		l.rw.Close()
		l.lockf, l.rw = nil, nil
	}()
	if err := l.owned(); err != nil {
		return err
	}
	free := l.rec
	free.Held, free.Holder, free.ID, free.PID, free.Since, free.Updated = false, "", "", 0, time.Time{}, time.Now().UTC()
	if hold > 0 {
		// The last holder's label, token and since stay, for status.
		free.Holder, free.Since, free.HeldUntil = l.rec.Holder, l.rec.Since, free.Updated.Add(hold)
	}
	b, _ := json.Marshal(free)
	b = append(b, '\n')
	if _, err := l.rw.WriteAt(b, 0); err == nil {
		_ = l.rw.Truncate(int64(len(b)))
	}
	return nil
}

// abandon closes the descriptors without touching the record, as a crash
// would. Tests use it through the Abandon hook.
func (l *fileLease) abandon() {
	defer l.stopWatch()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockf != nil {
		l.lockf.Close()
		l.rw.Close()
		l.lockf, l.rw = nil, nil
	}
}
