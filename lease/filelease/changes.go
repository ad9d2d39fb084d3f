package filelease

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.ChangeWatcher = (*Store)(nil)

// WatchChanges watches, with one inotify instance, the lease's lock files,
// its slots' included (a holder writes its record on acquisition and on
// release, and its write descriptor closes on release or death) and its
// candidates directory (a
// standby's file renamed in, removed, or its descriptor closed by its
// death). When the directories do not exist yet it watches their parents
// for their creation.
func (s *Store) WatchChanges(ctx context.Context, name string) (lease.Changes, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, err
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, classified(err, "cannot watch the file store")
	}
	c := &fileChanges{s: s, in: os.NewFile(uintptr(fd), "inotify"), lockBase: filepath.Base(s.Path(name)), candDir: s.candDir(name)}
	c.candBase = filepath.Base(c.candDir)
	if _, err := c.arm(); err != nil {
		c.in.Close()
		return nil, err
	}
	return c, nil
}

// Masks of the watches: the store directory (lock file events, the
// candidates directory appearing) and the candidates directory.
const (
	storeMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_ATTRIB
	candMask  = unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_CLOSE_WRITE | unix.IN_CREATE
)

type fileChanges struct {
	s                  *Store
	in                 *os.File
	lockBase, candBase string
	candDir            string

	mu       sync.Mutex
	storeWD  int  // watch of the store directory; 0 until it exists
	candWD   int  // watch of the candidates directory; 0 until it exists
	rechecks int  // short re-checks still due after a lock file event
	closed   bool // Close was called
}

// arm adds the watches that can be added now: the store directory (or,
// while it is missing, nothing: Next then polls) and the candidates
// directory. It reports whether it added one.
func (c *fileChanges) arm() (added bool, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fd := int(c.in.Fd())
	if c.storeWD == 0 {
		wd, err := unix.InotifyAddWatch(fd, c.s.dir, storeMask)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return false, classified(err, "cannot watch "+c.s.dir)
		}
		if err == nil {
			c.storeWD, added = wd, true
		}
	}
	if c.candWD == 0 {
		wd, err := unix.InotifyAddWatch(fd, c.candDir, candMask|unix.IN_DONT_FOLLOW|unix.IN_ONLYDIR)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return false, classified(err, "cannot watch "+c.candDir)
		}
		if err == nil {
			c.candWD, added = wd, true
		}
	}
	return added, nil
}

// recheck is how long Next waits after an event on the lock file before it
// returns anyway: a dying holder's kernel closes its write descriptor (the
// event) a moment before it drops the lock, so the state read right after
// the event may still show it holding.
const recheck = 50 * time.Millisecond

// Next returns on an event about the lease or its standbys, or ctx's end.
// Without the store directory (nothing was ever taken) it polls every
// PollInterval.
func (c *fileChanges) Next(ctx context.Context, _ *lease.Holder, _ []lease.Candidate) error {
	if added, err := c.arm(); err != nil || added {
		// A directory that appeared since the caller's reading may already
		// hold what the new watch cannot report: read again.
		return err
	}
	c.mu.Lock()
	wait := time.Duration(-1)
	if c.storeWD == 0 {
		wait = PollInterval
	}
	if c.rechecks > 0 {
		c.rechecks--
		wait = recheck
	}
	c.mu.Unlock()
	deadline := time.Time{}
	if wait >= 0 {
		deadline = time.Now().Add(wait)
	}
	_ = c.in.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.in.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := c.in.Read(buf)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return classified(err, "cannot read file store events")
		}
		if c.relevant(buf[:n]) {
			return nil
		}
	}
}

// relevant reports whether the events concern the lease, and arms the
// re-checks after a lock file event.
func (c *fileChanges) relevant(buf []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := false
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafePointer(buf[off:]))
		name := string(trimNUL(buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]))
		off += unix.SizeofInotifyEvent + int(ev.Len)
		switch {
		case int(ev.Wd) == c.candWD && c.candWD != 0:
			if name != "" && name[0] != '.' { // not a file still being written
				hit = true
				if ev.Mask&unix.IN_CLOSE_WRITE != 0 {
					c.rechecks = 4 // a standby died: its lock goes just after
				}
			}
		case name == c.lockBase || c.slotLock(name):
			hit = true
			if ev.Mask&unix.IN_CLOSE_WRITE != 0 {
				c.rechecks = 4
			}
		case name == c.candBase:
			hit = true // the candidates directory appeared: arm its watch at the next Next
		}
	}
	return hit
}

// slotLock reports whether name is the lock file of a slot of the lease
// (NAME~k.lock): a watch of a lease with slots sees each slot's changes.
func (c *fileChanges) slotLock(name string) bool {
	rest, ok := strings.CutSuffix(name, ".lock")
	if !ok {
		return false
	}
	base, _, ok := lease.ParseSlotName(rest)
	return ok && base+".lock" == c.lockBase
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// Close ends the watch.
func (c *fileChanges) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.in.Close()
}
