// Package filelease is leaderrun's embedded default store: one lock file per
// lease name in a local directory, locked with flock(2).
//
// The kernel drops a flock when the last descriptor of the open file
// description closes, so a crashed holder releases at once and the lease never
// needs a TTL. The lock is taken on a descriptor opened O_CLOEXEC, so the child
// never inherits it: a daemonised grandchild cannot keep the lease (unlike
// flock(1) without -o). The file holds a JSON holder record and the fencing
// counter; it is rewritten in place and never unlinked, because
// unlinking a lock file lets two processes lock two different inodes under one
// name. For the same reason every acquisition checks that the path still names
// the locked inode, and a held lease watches its file with inotify
// (IN_DELETE_SELF, IN_MOVE_SELF, IN_ATTRIB) from 100ms after it was taken:
// a replaced or removed lock file makes the lease lost at once (the lease's
// Lost channel closes), and every Renew checks it again.
//
// # Fencing tokens
//
// An acquisition's token is max(counter+1, the wall clock CLOCK_REALTIME in
// microseconds), and the record carrying it is written only once the clock
// has passed it. Tokens therefore strictly increase per name, and never go
// back even when the lock file is deleted or truncated (or lives on a tmpfs
// such as /run/lock that a reboot empties), under one assumption: the wall
// clock does not step back by more than the time between two acquisitions.
// (NTP slews it; a manual date change or a badly synchronised boot may step
// it.) Tokens stay below 2^53, so JSON readers get them exactly; a counter at
// or above 2^53 is refused as corrupt.
//
// # Shared directories
//
// A directory shared by several users works when created beforehand: group-
// writable (2775, lock files 0660 in its group) or world-writable and sticky
// (1777, lock files 0666). Lock files are opened with O_NOFOLLOW|O_NONBLOCK
// and must be regular files whose write permission does not reach beyond
// who may write the directory; see perm.go for the rules.
//
// Network file systems (NFS, CIFS/SMB, FUSE) emulate or distort flock, and
// kernel pseudo file systems (/proc, /sys) cannot hold lock files, so Open
// refuses them.
//
// Waiters watch their lease's lock file with inotify: a holder's release
// (and its death) closes a descriptor opened for writing on it, which wakes
// them at once, and nothing that happens to other files of the directory
// (other leases, history, standbys) wakes them at all.
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
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Store = (*Store)(nil)

// PollInterval is the longest a waiter sleeps without an inotify event before
// it tries again anyway (events are hints; this is the fallback).
const PollInterval = time.Second

// idlePollMax is the longest a waiter sleeps without an event while the
// lease stays held: the fallback interval doubles up to it.
const idlePollMax = 4 * time.Second

// Store is a directory of lock files. Its methods are safe for concurrent use.
type Store struct {
	dir string
	// now is the wall clock tokens are minted from; tests replace it.
	now func() time.Time

	// notify is the inotify instance of waits, made on the first Wait and
	// kept until Close: closing one waits for an SRCU grace period in the
	// kernel (10ms and more), which must not sit between a release and the
	// waiter's acquisition. Each Wait watches the lock file it waits for;
	// watches are never removed (that costs a grace period too): a watch
	// goes with its inode, and a Wait reads only its own watch's events.
	// notifyMu is held by the Wait reading it.
	notifyMu sync.Mutex
	notify   *os.File
	// events counts the inotify events Waits read (tests).
	events atomic.Int64

	// cands holds the open, locked files of the standbys this Store
	// registered (candidates.go), by candidate ID.
	candMu sync.Mutex
	cands  map[string]*os.File
}

// DefaultDir returns the per-user default directory,
// ~/.local/state/leaderrun, with ~ taken from the password database rather
// than $HOME, so cron, systemd and a login shell of one user agree. A uid
// without a password entry (a container run with -u N) has no default: two
// shells with different $HOME would otherwise get two leaders.
func DefaultDir() (string, error) {
	uid := os.Getuid()
	home := homeDir(uid)
	if home == "" || !filepath.IsAbs(home) {
		return "", newError(lease.ErrConfig, nil, fmt.Sprintf("no home directory for uid %d in the password database; give --store file:///some/dir", uid))
	}
	return filepath.Join(home, ".local", "state", "leaderrun"), nil
}

// Open returns the store in dir. It does not create dir: the first
// acquisition does (mode 0700), so a read such as Status never writes. It
// refuses, with an error wrapping lease.ErrConfig, a relative path, a path
// that is not a directory, a world-writable directory without the sticky
// bit, network file systems and kernel pseudo file systems.
func Open(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, newError(lease.ErrConfig, nil, fmt.Sprintf("the file store directory %q must be an absolute path", dir))
	}
	dir = filepath.Clean(dir)
	// The file system is the one of dir, or of its nearest existing parent
	// when dir is still to be created.
	probe := dir
	if _, err := statDir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for probe != "/" {
		var st unix.Stat_t
		err := unix.Stat(probe, &st)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOENT) {
			return nil, classified(err, "cannot read "+probe)
		}
		probe = filepath.Dir(probe)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(probe, &st); err != nil {
		return nil, classified(err, "cannot read the file system of "+probe)
	}
	if fs := networkFS(st.Type); fs != "" {
		return nil, newError(lease.ErrConfig, nil, fmt.Sprintf("%s is on %s, where flock is not reliable; use a local directory (e.g. --store file:///var/lock/leaderrun) or the redis store", dir, fs))
	}
	if fs := pseudoFS(st.Type); fs != "" {
		return nil, newError(lease.ErrConfig, nil, fmt.Sprintf("%s is on %s, a kernel file system that cannot hold lock files; use a directory on a local disk or tmpfs", dir, fs))
	}
	return &Store{dir: dir, now: time.Now}, nil
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

func pseudoFS(magic int64) string {
	switch uint32(magic) {
	case unix.PROC_SUPER_MAGIC:
		return "procfs"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	case unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC:
		return "cgroupfs"
	case unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.BPF_FS_MAGIC, unix.PSTOREFS_MAGIC:
		return "a kernel pseudo file system"
	case unix.DEVPTS_SUPER_MAGIC:
		return "devpts"
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

// Close releases the inotify instance of waits, if any, and drops the
// standbys this Store registered.
func (s *Store) Close() error {
	s.closeCandidates()
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if s.notify != nil {
		err := s.notify.Close()
		s.notify = nil
		return err
	}
	return nil
}

// watcher returns the store's inotify instance for waits, making it on
// first use; s.notifyMu must be held.
func (s *Store) watcher() (*os.File, error) {
	if s.notify != nil {
		return s.notify, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	s.notify = os.NewFile(uintptr(fd), "inotify")
	return s.notify, nil
}

// waitArmed, when set (by tests), is called when a Wait has armed its watch
// and goes to sleep.
var waitArmed atomic.Pointer[func()]

// waitMask is what a waiter watches on the lock file: a descriptor opened
// for writing closes (a holder's release or death), and the file is removed
// or replaced (its link count drops: IN_ATTRIB; then IN_DELETE_SELF), or
// renamed.
const waitMask = unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW

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
	// OFD says the holder also holds an OFD read lock on the file, which
	// probes test with F_OFD_GETLK without taking any lock. Records of
	// older versions lack it and are probed with a shared flock.
	OFD bool `json:"ofd,omitempty"`
	// HeldUntil, on a record that is not Held, is the end of the hold its
	// last holder released it with (ReleaseHeld): acquirers treat the lease
	// as taken until then, by the wall clock. Holder, Token and Since stay
	// the last holder's, for status.
	HeldUntil time.Time `json:"held_until,omitzero"`
}

func (r record) holder() lease.Holder {
	return lease.Holder{Name: r.Name, Label: r.Holder, ID: r.ID, Token: r.Token, Since: r.Since}
}

// holdLeft is what remains of the record's hold at now; 0 when there is
// none (or the record is held, when the lock decides).
func (r record) holdLeft(now time.Time) time.Duration {
	if r.Held || r.HeldUntil.IsZero() {
		return 0
	}
	return max(r.HeldUntil.Sub(now), 0)
}

// heldError reports the lease taken by r's hold.
func (r record) heldError(name string, left time.Duration) *lease.HeldError {
	by := r.holder()
	by.Name, by.ID, by.HeldUntil, by.Remaining = name, "", r.HeldUntil, left
	return &lease.HeldError{By: by}
}

// readRecord reads the record at the start of f; a missing or empty record
// reads as the zero record. A torn or unreadable record, or a counter at or
// above 2^53, is an error wrapping lease.ErrConfig: the file is corrupt.
func readRecord(f *os.File) (record, error) {
	// Readers that do not hold the lock (status, watch, a waiter reporting
	// the holder) can see a record half rewritten: a read is not atomic with
	// a concurrent write. A torn read is re-read; only a record that stays
	// unreadable is corrupt.
	var (
		r   record
		err error
	)
	for attempt := range 20 {
		if r, err = readRecordOnce(f); !isTorn(err) {
			return r, err
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Microsecond)
	}
	return r, err
}

// isTorn reports whether err is a record that did not decode, which a
// concurrent rewrite can cause.
func isTorn(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

func readRecordOnce(f *os.File) (record, error) {
	buf := make([]byte, 4096)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return record{}, classified(err, "cannot read lock file "+f.Name())
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	var r record
	if len(bytes.TrimSpace(line)) == 0 {
		return record{}, nil
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return record{}, newError(lease.ErrConfig, err, fmt.Sprintf("lock file %s is corrupt; inspect it, then remove it (tokens still never go back: they follow the clock)", f.Name()))
	}
	if r.Token > MaxToken {
		return record{}, newError(lease.ErrConfig, nil, fmt.Sprintf(
			"lock file %s is corrupt: its fencing counter %d is not below 2^53; inspect it, then remove it (tokens still never go back: they follow the clock)", f.Name(), r.Token))
	}
	return r, nil
}

// writeRecord rewrites f in place (never a new inode). It does not sync
// it: nothing in the record needs to survive a power loss. The holder is
// gone with the machine (and its flock with it), and the token needs no
// durable counter, because mint returns a token only once the clock has
// passed it, so every token minted after a reboot is larger than any the
// lost write held, as long as the clock does not step back (the one
// assumption tokens rest on; see "Fencing tokens" above). An fdatasync
// here cost every run a journal commit (1-3 ms on ext4) before its child.
func writeRecord(f *os.File, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(b)))
}

// sameFile reports whether path still names the inode open as f. A
// symbolic link at path never matches, even one pointing to f.
func sameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// dirInfo reads the store directory's permissions, creating it first when
// create is set and it is missing.
func (s *Store) dirInfo(create bool) (dirInfo, error) {
	d, err := statDir(s.dir)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := makeDir(s.dir); err != nil {
			return dirInfo{}, err
		}
		d, err = statDir(s.dir)
	}
	return d, err
}

// TryAcquire takes the lock without blocking, creating the directory and the
// lock file if needed.
func (s *Store) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := lease.ValidateStoreName(req.Name); err != nil {
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
			return nil, newError(lease.ErrUnavailable, nil, "lock file "+path+" keeps being replaced")
		}
	}
}

// tryOnce makes one attempt; retry is true when the lock file was replaced
// under us and the attempt should be repeated on the new inode. Its steps:
// take the lock (lock), open the holder's descriptor on the same inode
// (openHolder), write the record with a new token (hold).
func (s *Store) tryOnce(path string, req lease.Request) (_ lease.Lease, retry bool, _ error) {
	d, err := s.dirInfo(true)
	if err != nil {
		return nil, false, err
	}
	lockf, retry, err := lock(path, req, d)
	if lockf == nil {
		return nil, retry, err
	}
	rw, retry, err := openHolder(path, d, lockf)
	if rw == nil {
		lockf.Close()
		return nil, retry, err
	}
	return s.hold(path, req, lockf, rw)
}

// lock takes the exclusive lock on the lock file at path and returns its
// descriptor, or nil with a *lease.HeldError (someone holds it, or a
// finished holder's hold runs), with retry (the file was replaced), or
// with another error.
func lock(path string, req lease.Request, d dirInfo) (_ *os.File, retry bool, _ error) {
	// The lock is probed on a read-only descriptor: a failed attempt then
	// closes without IN_CLOSE_WRITE, so waiters don't wake each other.
	lockf, err := openLock(path, unix.O_RDONLY, d, true)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, true, nil // the directory went away: make it again
		}
		return nil, false, err
	}
	got, err := lockExclusive(int(lockf.Fd()))
	if err != nil {
		lockf.Close()
		return nil, false, classified(err, "cannot lock "+path)
	}
	if !got {
		defer lockf.Close()
		r, _ := readRecord(lockf) // best effort: a torn record just names no one
		by := r.holder()
		by.Name, by.ID = req.Name, ""
		if !r.Held { // the new holder has not written its record yet
			by = lease.Holder{Name: req.Name}
		}
		return nil, false, &lease.HeldError{By: by}
	}
	// A finished holder's hold (ReleaseHeld) keeps the lease taken without
	// a lock: honour it, and let go of the lock without a write descriptor,
	// so no waiter wakes for nothing.
	if r, err := readRecord(lockf); err == nil {
		if left := r.holdLeft(time.Now()); left > 0 {
			_ = unix.Flock(int(lockf.Fd()), unix.LOCK_UN)
			lockf.Close()
			return nil, false, r.heldError(req.Name, left)
		}
	}
	// The OFD read lock lives on the same open file description as the
	// flock, so it is dropped with it (a crash, or the last duplicate of the
	// descriptor closing), and probes can test it without locking (probe).
	// It cannot conflict with another read lock; if someone with write
	// access holds a write lock, probes see theirs instead.
	_ = unix.FcntlFlock(lockf.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_RDLCK})
	ok, err := sameFile(lockf, path)
	if err != nil || !ok {
		lockf.Close()
		if err != nil {
			return nil, false, classified(err, "cannot read lock file "+path)
		}
		return nil, true, nil
	}
	return lockf, false, nil
}

// openHolder opens the holder's descriptor on the locked file lockf, for
// writing: its close, on release or on death, is the IN_CLOSE_WRITE event
// that wakes waiters. It returns nil with retry when path no longer names
// lockf's inode. It never closes lockf.
func openHolder(path string, d dirInfo, lockf *os.File) (_ *os.File, retry bool, _ error) {
	rw, err := openLock(path, unix.O_RDWR, d, false)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, true, nil
		}
		return nil, false, err
	}
	if same, err := sameFile(rw, path); err != nil || !same || !sameInode(rw, lockf) {
		rw.Close()
		if err != nil {
			return nil, false, classified(err, "cannot read lock file "+path)
		}
		return nil, true, nil
	}
	return rw, false, nil
}

// hold writes the new holder's record, with a token above the previous
// one, through rw, and returns the lease; it closes both descriptors when
// it fails.
func (s *Store) hold(path string, req lease.Request, lockf, rw *os.File) (_ lease.Lease, retry bool, _ error) {
	fail := func(err error) (lease.Lease, bool, error) {
		rw.Close()
		lockf.Close()
		return nil, false, err
	}
	prev, err := readRecord(rw)
	if err != nil {
		// A torn record can only come from a crash mid-write or an edit:
		// refuse rather than guess.
		return fail(err)
	}
	tok, err := s.mintFor(req, prev.Token, path)
	if err != nil {
		return fail(err)
	}
	now := time.Now().UTC() // the record's clock; UTC spares a run reading the time zone
	rec := record{Name: req.Name, Holder: req.Label, ID: req.ID, Token: tok, Since: now, PID: os.Getpid(), Held: true, Updated: now, OFD: true}
	if err := writeRecord(rw, rec); err != nil {
		return fail(classified(err, "cannot write lock file "+path))
	}
	l := &fileLease{path: path, lockf: lockf, rw: rw, rec: rec, lost: make(chan struct{})}
	l.startWatch()
	// The file may have been replaced while the record was written: then
	// this acquisition is void (its token went into an inode nobody will
	// see) and is made again on the new file. A replacement after this
	// check comes after the record, so a holder of the new file mints from
	// a clock already past our token; the watch, once armed, ends our lease.
	if same, err := sameFile(lockf, path); err != nil || !same {
		l.abandon()
		if err != nil {
			return nil, false, classified(err, "cannot read lock file "+path)
		}
		return nil, true, nil
	}
	return l, false, nil
}

func sameInode(a, b *os.File) bool {
	ai, err1 := a.Stat()
	bi, err2 := b.Stat()
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

// probeTolerance bounds how long lockExclusive keeps retrying while only
// shared locks (probes) stand in its way.
const probeTolerance = 50 * time.Millisecond

// lockExclusive takes the exclusive flock on fd without blocking, and
// reports false when someone holds it exclusively. Only holders take the
// lock exclusively; the shared locks that older versions' Status and waiters
// take to probe for a crashed holder last microseconds (this version's take
// none: see probe), so when the exclusive attempt
// fails but a shared one succeeds, the lease is free and the attempt is
// repeated (for up to probeTolerance): a probe never makes a free lease look
// held to an acquirer.
func lockExclusive(fd int) (bool, error) {
	deadline := time.Now().Add(probeTolerance)
	for i := 0; ; i++ {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return false, err
		}
		err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // an exclusive lock: a holder
		}
		if err != nil {
			return false, err
		}
		_ = unix.Flock(fd, unix.LOCK_UN)
		if time.Now().After(deadline) {
			return false, nil // someone keeps a shared lock: treat as held
		}
		// Other acquirers doing the same dance back off at random, so one
		// of them wins.
		if i < 3 {
			runtime.Gosched()
		} else {
			time.Sleep(time.Duration(rand.N(min(i, 50))+1) * 10 * time.Microsecond)
		}
	}
}

// Status reads the holder record of name, or nil when nobody holds the lock.
// It never creates anything; a store directory that does not exist is an
// error (see missingDir). A record its holder marked free on release is
// trusted. A record that says held (its holder may have crashed instead) is
// checked with probe, which takes no lock, so it cannot make a free lease
// look held to an acquirer. (Reading /proc/locks instead stalls every flock
// on the machine for milliseconds.)
func (s *Store) Status(ctx context.Context, name string) (*lease.Holder, error) {
	if err := lease.ValidateStoreName(name); err != nil {
		return nil, err
	}
	h, _, err := s.status(name)
	return h, err
}

// missingDir is what a read (status, history) says of a store directory
// that does not exist: nothing has ever run with it, which is most often a
// mistyped --store, so it is an error that names the directory, not a
// free lease or an empty history.
func (s *Store) missingDir() error {
	return newError(lease.ErrConfig, nil, fmt.Sprintf("the file store directory %s does not exist (no lease was ever taken with this store: check --store)", s.dir))
}

// status is Status with the holder's acquisition ID, returned apart.
func (s *Store) status(name string) (*lease.Holder, string, error) {
	d, err := s.dirInfo(false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", s.missingDir()
	}
	if err != nil {
		return nil, "", err
	}
	path := s.Path(name)
	f, err := openLock(path, unix.O_RDONLY, d, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	r, err := readRecord(f)
	if err != nil {
		return nil, "", err
	}
	if left := r.holdLeft(time.Now()); left > 0 {
		return &r.heldError(name, left).By, "", nil
	}
	if held, err := probe(f); err != nil || !held {
		return nil, "", err
	}
	if !r.Held {
		// Locked, but by no holder that wrote a record: a process that is
		// not leaderrun (another user's flock(1) on a shared lock file), or
		// a holder between its lock and its record. Held, by someone
		// unknown.
		return &lease.Holder{Name: name}, "", nil
	}
	h := r.holder()
	h.Name, h.ID = name, ""
	return &h, r.ID, nil
}

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
	lk := unix.Flock_t{Type: unix.F_WRLCK}
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
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return true, nil
		}
		return false, classified(err, "cannot probe the lock of "+f.Name())
	}
	_ = unix.Flock(fd, unix.LOCK_UN)
	return false, nil
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
