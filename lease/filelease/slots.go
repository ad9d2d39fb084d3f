package filelease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// Slots (lease.Request.Slots above 1). Each slot of lease NAME is a lease of
// its own: slot 0 is NAME.lock itself, slot k is NAME~k.lock ('~' is in no
// lease name, so no user names a slot). Their tokens come from one counter,
// NAME~token: a file holding the last token minted for any slot, as
// decimal text, locked (flock) for the instant of the mint and written
// before the slot's record (not synced, for writeRecord's reason). A slot's token is max(its own
// counter + 1, the shared counter + 1, the clock in microseconds): strictly
// increasing across the slots of NAME. A lease taken without slots never
// opens the shared counter, so its files are byte for byte what they were.

// tokenPath is the shared token counter of the slots of lease name.
func (s *Store) tokenPath(name string) string {
	return s.auxPath(name, "token")
}

// counterLockWait bounds how long a mint waits for another slot's mint
// to let go of the shared counter (it holds it for a read and a write).
const counterLockWait = 2 * time.Second

// mintFor mints the token of req, whose lock file at path holds counter
// prev: from the shared counter of its lease when req has slots.
func (s *Store) mintFor(req lease.Request, prev uint64, path string) (uint64, error) {
	if req.Slots <= 1 {
		return mint(prev, s.now, path)
	}
	name, _, _ := lease.ParseSlotName(req.Name)
	d, err := s.dirInfo(true)
	if err != nil {
		return 0, err
	}
	cpath := s.tokenPath(name)
	f, err := openLock(cpath, unix.O_RDWR, d, true)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := lockCounter(f); err != nil {
		return 0, classified(err, "cannot lock "+cpath)
	}
	shared, err := readCounter(f)
	if err != nil {
		return 0, err
	}
	tok, err := mint(max(prev, shared), s.now, path)
	if err != nil {
		return 0, err
	}
	b := []byte(strconv.FormatUint(tok, 10) + "\n")
	if _, err := f.WriteAt(b, 0); err != nil {
		return 0, classified(err, "cannot write "+cpath)
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return 0, classified(err, "cannot write "+cpath)
	}
	return tok, nil // closing f lets go of the lock
}

// lockCounter takes the exclusive lock of the shared counter, waiting up to
// counterLockWait for another mint to finish.
func lockCounter(f *os.File) error {
	deadline := time.Now().Add(counterLockWait)
	for d := 50 * time.Microsecond; ; d = min(2*d, 10*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return newError(lease.ErrUnavailable, nil, "the token counter "+f.Name()+" stays locked by another slot's acquisition")
		}
		time.Sleep(d)
	}
}

// readCounter reads the shared counter: 0 when empty; a corrupt one is an
// error wrapping lease.ErrConfig.
func readCounter(f *os.File) (uint64, error) {
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, classified(err, "cannot read "+f.Name())
	}
	text := strings.TrimSpace(string(buf[:n]))
	if text == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil || v > MaxToken {
		return 0, newError(lease.ErrConfig, nil, fmt.Sprintf("the token counter %s is corrupt (%q); inspect it, then remove it (tokens still never go back: they follow the clock)", f.Name(), text))
	}
	return v, nil
}

// WaitAny is Wait for the lock files of several leases at once (the slots
// of a lease, lease.MultiWaiter): it returns when a descriptor opened for
// writing on any of them closes, one of them is replaced, a look finds one
// free (or its hold ended), or ctx ends. One inotify instance watches them
// all, so the release of any slot wakes the waiter at once.
func (s *Store) WaitAny(ctx context.Context, names []string, _ []*lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.notifyMu.TryLock() {
		return sleep(ctx, jitter(PollInterval/4))
	}
	defer s.notifyMu.Unlock()
	in, err := s.watcher()
	if err != nil {
		return sleep(ctx, jitter(PollInterval/4)) // no inotify instance: a short poll
	}
	drain(in)
	wds := make(map[int]string, len(names))
	for _, n := range names {
		path := s.Path(n)
		wd, err := unix.InotifyAddWatch(int(in.Fd()), path, waitMask)
		if errors.Is(err, unix.ENOENT) {
			return nil // a slot's lock file went: the caller's attempt makes it again
		}
		if err != nil {
			return sleep(ctx, jitter(PollInterval/4))
		}
		wds[wd] = path
	}
	return s.sleepOnAny(ctx, in, wds)
}

// sleepOnAny sleeps on the events of the watches wds (watch → lock file)
// until one reports a change, a look finds a lock file free, or ctx ends.
func (s *Store) sleepOnAny(ctx context.Context, in *os.File, wds map[int]string) error {
	stop := context.AfterFunc(ctx, func() { _ = in.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for idle := PollInterval; ; idle = min(2*idle, idlePollMax) {
		// The holders may have gone between the caller's attempts and the
		// watches, and a hold ends without an event: look, and sleep at
		// most until the first hold ends.
		var holdEnd time.Time
		for _, path := range wds {
			free, end, err := s.looksFree(path)
			if free || err != nil {
				return nil
			}
			if !end.IsZero() && (holdEnd.IsZero() || end.Before(holdEnd)) {
				holdEnd = end
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = in.SetReadDeadline(wakeAt(idle, holdEnd))
		if ctx.Err() != nil { // cancelled while arming: its past deadline may be overwritten
			return ctx.Err()
		}
		if f := waitArmed.Load(); f != nil && idle == PollInterval {
			(*f)()
		}
		n, err := in.Read(buf)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			continue // the fallback interval passed: look again
		}
		for wd, path := range wds {
			hit, count := eventFor(buf[:n], wd)
			if hit {
				s.events.Add(int64(count))
				return s.settle(ctx, path)
			}
		}
	}
}

var _ lease.MultiWaiter = (*Store)(nil)

var _ lease.SlotLister = (*Store)(nil)

// ListSlots returns the slots k ≥ 1 of lease name that have a lock file,
// in increasing order: one read of the directory, so a status of a lease
// needs to read only those. A missing directory has none.
func (s *Store) ListSlots(_ context.Context, name string) ([]int, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, err
	}
	d, err := os.Open(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, classified(err, "cannot read the file store directory "+s.dir)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, classified(err, "cannot read the file store directory "+s.dir)
	}
	stem := strings.TrimSuffix(filepath.Base(s.Path(name)), ".lock")
	var ks []int
	for _, n := range names {
		rest, ok := strings.CutSuffix(n, ".lock")
		if !ok {
			continue
		}
		if base, k, ok := lease.ParseSlotName(rest); ok && base == stem {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks, nil
}
