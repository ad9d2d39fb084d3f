// Package filelease is leaderrun's embedded default store: one lock file per
// lease name in a local directory, locked with flock(2).
//
// The kernel drops a flock when the last descriptor of the open file
// description closes, so a crashed holder releases at once and the lease never
// needs a TTL. The lock is taken on a descriptor opened O_CLOEXEC, so the child
// never inherits it: a daemonised grandchild cannot keep the lease (unlike
// flock(1) without -o). The file holds a JSON holder record and the fencing
// counter; it is rewritten in place and never unlinked, because unlinking a
// lock file lets two processes lock two different inodes under one name. For
// the same reason every acquisition and every renewal checks that the path
// still names the locked inode: a replaced or removed lock file means the
// lease is lost.
//
// Deleting a lock file resets its fencing counter; don't. Network file
// systems (NFS, CIFS/SMB) emulate or distort flock, so Open refuses them.
//
// Waiters watch the directory with inotify: a holder's release (and its
// death) closes a descriptor opened for writing, which wakes them at once.
package filelease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Store = (*Store)(nil)

// PollInterval is the longest a waiter sleeps without an inotify event before
// it tries again anyway (events are hints; this is the fallback).
const PollInterval = time.Second

// Store is a directory of lock files. Its methods are safe for concurrent use.
type Store struct {
	dir string

	// notify is the directory's inotify instance, made on the first Wait
	// and kept until Close: closing one waits for an SRCU grace period in the
	// kernel (10ms and more), which must not sit between a release and the
	// waiter's acquisition. notifyMu is held by the Wait reading it.
	notifyMu sync.Mutex
	notify   *os.File
}

// DefaultDir returns the per-user default directory,
// ~/.local/state/leaderrun, with ~ taken from the password database rather
// than $HOME, so cron, systemd and a login shell of one user agree.
func DefaultDir() (string, error) {
	home := ""
	if u, err := user.Current(); err == nil {
		home = u.HomeDir
	}
	if home == "" {
		home = os.Getenv("HOME")
	}
	if home == "" {
		return "", fmt.Errorf("%w: no home directory for the default file store; use --store file:///some/dir", lease.ErrConfig)
	}
	return filepath.Join(home, ".local", "state", "leaderrun"), nil
}

// Open returns the store in dir, creating the directory (mode 0700) if needed.
// It refuses network file systems with an error wrapping lease.ErrConfig.
func Open(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: file store directory %q must be an absolute path", lease.ErrConfig, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: cannot create the file store directory: %w", lease.ErrConfig, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("%w: statfs %s: %w", lease.ErrConfig, dir, err)
	}
	if fs := networkFS(st.Type); fs != "" {
		return nil, fmt.Errorf("%w: %s is on %s, where flock is not reliable; use a local directory (e.g. --store file:///var/lock/leaderrun) or the redis store", lease.ErrConfig, dir, fs)
	}
	return &Store{dir: dir}, nil
}

func networkFS(magic int64) string {
	switch uint32(magic) {
	case unix.NFS_SUPER_MAGIC:
		return "NFS"
	case unix.SMB_SUPER_MAGIC, 0xFF534D42, 0xFE534D42: // SMB, CIFS, SMB2
		return "CIFS/SMB"
	case 0x65735546: // FUSE: sshfs and friends
		return "FUSE"
	}
	return ""
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path returns the lock file of a lease name. '/' in names becomes '%' so
// every name is one file; '%' is not allowed in names, so this is one-to-one.
func (s *Store) Path(name string) string {
	return filepath.Join(s.dir, strings.ReplaceAll(name, "/", "%")+".lock")
}

// Limits: file leases do not expire; they end with the holder's process.
func (s *Store) Limits() lease.Limits { return lease.Limits{Expires: false} }

// Close releases the inotify instance of waits, if any.
func (s *Store) Close() error {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if s.notify != nil {
		err := s.notify.Close()
		s.notify = nil
		return err
	}
	return nil
}

// watcher returns the store's inotify instance watching the directory,
// making it on first use; s.notifyMu must be held.
func (s *Store) watcher() (*os.File, error) {
	if s.notify != nil {
		return s.notify, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, s.dir, unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE|unix.IN_ATTRIB); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	s.notify = os.NewFile(uintptr(fd), "inotify")
	return s.notify, nil
}

// record is the lock file's content.
type record struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder,omitempty"`
	ID      string    `json:"id,omitempty"`
	Token   uint64    `json:"token"`
	Since   time.Time `json:"since,omitzero"`
	PID     int       `json:"pid,omitempty"`
	Held    bool      `json:"held"`
	Updated time.Time `json:"updated,omitzero"`
}

func (r record) holder() lease.Holder {
	return lease.Holder{Name: r.Name, Holder: r.Holder, ID: r.ID, Token: r.Token, Since: r.Since}
}

// readRecord reads the record at the start of f; a missing, empty or torn
// record reads as the zero record.
func readRecord(f *os.File) (record, error) {
	buf := make([]byte, 4096)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return record{}, err
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	var r record
	if len(bytes.TrimSpace(line)) == 0 {
		return record{}, nil
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return record{}, fmt.Errorf("corrupt lock file %s: %w", f.Name(), err)
	}
	return r, nil
}

// writeRecord rewrites f in place (never a new inode) and syncs it, so the
// fencing counter survives a power loss.
func writeRecord(f *os.File, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return err
	}
	return unix.Fdatasync(int(f.Fd()))
}

// sameFile reports whether path still names the inode open as f.
func sameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// TryAcquire takes the lock without blocking.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := lease.ValidateName(req.Name); err != nil {
		return nil, err
	}
	path := s.Path(req.Name)
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l, retry, err := s.tryOnce(path, req)
		if !retry {
			return l, err
		}
		if attempt == 5 {
			return nil, fmt.Errorf("%w: lock file %s keeps being replaced", lease.ErrUnavailable, path)
		}
	}
}

// tryOnce makes one attempt; retry is true when the lock file was replaced
// under us and the attempt should be repeated on the new inode.
func (s *Store) tryOnce(path string, req lease.Request) (_ lease.Lease, retry bool, _ error) {
	// The lock is probed on a read-only descriptor: a failed attempt then
	// closes without IN_CLOSE_WRITE, so waiters don't wake each other.
	lockf, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, false, s.openErr(err)
	}
	if err := unix.Flock(int(lockf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer lockf.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			r, _ := readRecord(lockf) // best effort: a torn record just names no one
			by := r.holder()
			by.Name, by.ID = req.Name, ""
			if !r.Held { // the new holder has not written its record yet
				by = lease.Holder{Name: req.Name}
			}
			return nil, false, &lease.HeldError{By: by}
		}
		return nil, false, fmt.Errorf("%w: flock %s: %w", lease.ErrUnavailable, path, err)
	}
	ok, err := sameFile(lockf, path)
	if err != nil || !ok {
		lockf.Close()
		return nil, err == nil, err
	}
	// The holder's descriptor is opened for writing: its close, on release or
	// on death, is the IN_CLOSE_WRITE event that wakes waiters.
	rw, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		lockf.Close()
		return nil, false, s.openErr(err)
	}
	if same, err := sameFile(rw, path); err != nil || !same || !sameInode(rw, lockf) {
		rw.Close()
		lockf.Close()
		return nil, err == nil, err
	}
	prev, err := readRecord(rw)
	if err != nil {
		// A torn record can only come from a crash mid-write; the counter
		// is lost with it, so refuse rather than re-issue tokens.
		rw.Close()
		lockf.Close()
		return nil, false, fmt.Errorf("%w: %w; inspect it, then remove it to reset the lease", lease.ErrConfig, err)
	}
	now := time.Now()
	rec := record{Name: req.Name, Holder: req.Holder, ID: req.ID, Token: prev.Token + 1, Since: now, PID: os.Getpid(), Held: true, Updated: now}
	if err := writeRecord(rw, rec); err != nil {
		rw.Close()
		lockf.Close()
		return nil, false, fmt.Errorf("%w: writing %s: %w", lease.ErrUnavailable, path, err)
	}
	return &fileLease{path: path, lockf: lockf, rw: rw, rec: rec}, false, nil
}

func sameInode(a, b *os.File) bool {
	ai, err1 := a.Stat()
	bi, err2 := b.Stat()
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

func (s *Store) openErr(err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %w (check the directory's permissions or use another --store)", lease.ErrConfig, err)
	}
	return fmt.Errorf("%w: %w", lease.ErrUnavailable, err)
}

// Status reads the holder record of name, or nil when nobody holds the lock.
// A record its holder marked free on release is trusted. A record that says
// held (its holder may have crashed instead) is checked with a shared,
// non-blocking probe of the lock, released at once; only if the holder
// crashed can that probe, in the microsecond it holds the lock, make a
// concurrent acquirer see the lease as held. (Reading /proc/locks instead
// stalls every flock on the machine for milliseconds.)
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, err
	}
	path := s.Path(name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, s.openErr(err)
	}
	defer f.Close()
	r, err := readRecord(f)
	if err != nil || !r.Held {
		return nil, err
	}
	if free, err := s.looksFree(path); err != nil || free {
		return nil, err
	}
	h := r.holder()
	h.Name, h.ID = name, ""
	return &h, nil
}

// Wait blocks until a descriptor opened for writing on the lock file closes
// (the holder released or died), the file is replaced, ctx ends, or
// PollInterval (jittered) passes.
func (s *Store) Wait(ctx context.Context, name string, _ *lease.HeldError) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path := s.Path(name)
	base := filepath.Base(path)
	// One Wait at a time reads the shared instance; a concurrent Wait on the
	// same Store (not leaderrun's case) falls back to polling.
	if !s.notifyMu.TryLock() {
		return sleep(ctx, jitter(PollInterval/4))
	}
	defer s.notifyMu.Unlock()
	in, err := s.watcher()
	if err != nil {
		return sleep(ctx, jitter(PollInterval))
	}
	// Events queued while nobody waited are stale: drop them. The check
	// below covers a release that happened in the meantime.
	drain(in)
	// The holder may have gone between the caller's attempt and the watch.
	if free, _ := s.looksFree(path); free {
		return nil
	}
	// The fallback deadline is set once, before cancellation can move it into
	// the past, so a cancel is never overwritten.
	_ = in.SetReadDeadline(time.Now().Add(jitter(PollInterval)))
	stop := context.AfterFunc(ctx, func() { _ = in.SetReadDeadline(time.Unix(1, 0)) })
	// A callback still running after stop can only leave a past deadline
	// for the next Wait: a spurious wake-up, never a missed one.
	defer stop()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := in.Read(buf)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return nil // the fallback poll interval passed
		}
		if eventFor(buf[:n], base) {
			// A descriptor of the holder closed. The kernel may signal the
			// close a moment before it drops the lock (a crashed holder), so
			// look again briefly before going back to sleep.
			return s.settle(ctx, path)
		}
	}
}

// settle waits up to ~200ms for the lock on path to be dropped after an
// event: a dying holder's kernel closes its write descriptor (the event) and
// its lock descriptor (the release) in separate steps.
func (s *Store) settle(ctx context.Context, path string) error {
	for d := 100 * time.Microsecond; d < 200*time.Millisecond; d *= 2 {
		if free, err := s.looksFree(path); free || err != nil {
			return nil
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// looksFree probes the lock with a shared, non-blocking flock on a read-only
// descriptor, released at once. The probe can make a concurrent acquirer's
// attempt fail only in the instant it holds the lock; only waiters probe, and
// a waiter then tries to acquire, so that acquirer simply lost the race to it.
func (s *Store) looksFree(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return true, nil
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true, nil
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

func eventFor(buf []byte, base string) bool {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafePointer(buf[off:]))
		nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		if string(bytes.TrimRight(nameBytes, "\x00")) == base {
			return true
		}
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	return false
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

// fileLease is one held lock.
type fileLease struct {
	path  string
	mu    sync.Mutex
	lockf *os.File // holds the flock
	rw    *os.File // writes the record; its close wakes waiters
	rec   record
}

func (l *fileLease) Info() lease.Holder { return l.rec.holder() }

// Renew checks that the path still names our locked inode and that the
// record is still ours: a replaced, removed or rewritten file means lost.
func (l *fileLease) Renew(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockf == nil {
		return fmt.Errorf("%w: already released", lease.ErrNotHeld)
	}
	return l.owned()
}

// owned checks that the path still names our locked inode and that the
// record still carries our ID; l.mu must be held.
func (l *fileLease) owned() error {
	same, err := sameFile(l.lockf, l.path)
	if err != nil {
		return fmt.Errorf("%w: %w", lease.ErrUnavailable, err)
	}
	if !same {
		return fmt.Errorf("%w: lock file %s was replaced or removed", lease.ErrLost, l.path)
	}
	r, err := readRecord(l.rw)
	if err != nil || r.ID != l.rec.ID {
		return fmt.Errorf("%w: lock file %s was rewritten by someone else", lease.ErrLost, l.path)
	}
	return nil
}

// Release marks the record free (keeping the counter), drops the lock and
// then closes the write descriptor, whose close wakes waiters after the lock
// is already gone.
func (l *fileLease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockf == nil {
		return fmt.Errorf("%w: already released", lease.ErrNotHeld)
	}
	defer func() {
		_ = unix.Flock(int(l.lockf.Fd()), unix.LOCK_UN)
		l.lockf.Close()
		l.rw.Close()
		l.lockf, l.rw = nil, nil
	}()
	if err := l.owned(); err != nil {
		return err
	}
	free := l.rec
	free.Held, free.Holder, free.ID, free.PID, free.Since, free.Updated = false, "", "", 0, time.Time{}, time.Now()
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockf != nil {
		l.lockf.Close()
		l.rw.Close()
		l.lockf, l.rw = nil, nil
	}
}
