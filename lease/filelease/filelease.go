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
// it.) A counter further ahead of the clock than lease.MaxClockSkew refuses
// the acquisition (lease.ErrTokenAhead). Tokens stay below 2^53, so JSON readers get them exactly; a counter at
// or above 2^53 is refused as corrupt.
//
// # Shared directories
//
// A directory shared by several users works when created beforehand and
// shared with a group (group-writable and not world-writable, typically 2775:
// lock files 0660 in its group). A world-writable directory (1777, such as
// /run/lock) is refused unless opened with Options.World: in it every local
// user can rewrite a lock file (stopping its holder), plant files under the
// names a lease will use, and push the token counter to its end, so the
// store cannot keep its promises against them. Lock files are opened with
// O_NOFOLLOW|O_NONBLOCK and must be regular files whose write permission
// does not reach beyond who may write the directory; see perm.go for the
// rules.
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
	"context"
	"errors"
	"fmt"
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
	// world accepts a directory that every user may write (Options.World).
	world bool
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

// Options are the choices of OpenWith. The zero value is Open's.
type Options struct {
	// World accepts a store directory that every user may write (1777,
	// such as /run/lock): any of them can then stop, block or take over
	// its jobs (see "Shared directories" above). Without it such a
	// directory is refused.
	World bool
}

// Open returns the store in dir. It does not create dir: the first
// acquisition does (mode 0700), so a read such as Status never writes. It
// refuses, with an error wrapping lease.ErrConfig, a relative path, a path
// that is not a directory, a world-writable directory (always without the
// sticky bit; with it, unless OpenWith's Options.World), network file
// systems and kernel pseudo file systems.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, o Options) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, newError(lease.ErrConfig, nil, fmt.Sprintf("the file store directory %q must be an absolute path", dir))
	}
	dir = filepath.Clean(dir)
	// The file system is the one of dir, or of its nearest existing parent
	// when dir is still to be created.
	probe := dir
	if d, err := statDir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else if err == nil && d.world() && !o.World {
		return nil, worldError(dir, d)
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
	return &Store{dir: dir, world: o.World, now: time.Now}, nil
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

// auxSep starts the part of an auxiliary file's name (history, standbys,
// the slots' token counter, temporary files) that follows the lease name:
// '~' is in no lease name and '%' stands for '/', so the lease name is what
// comes before the first '~', and no lease name can make a file name, or a
// prefix, of another lease's auxiliary files. (Slot k's lock file,
// NAME~k.lock, is the one name with a number after it.)
const auxSep = "~"

// auxPath returns the auxiliary file kind of lease name: DIR/NAME~kind.
func (s *Store) auxPath(name, kind string) string {
	return strings.TrimSuffix(s.Path(name), ".lock") + auxSep + kind
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
	if err == nil && d.world() && !s.world {
		return dirInfo{}, worldError(s.dir, d)
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
	clock := s.now()
	if lease.TokenAhead(tok, clock) {
		// Refused before the record: nothing was granted, and the
		// counter is left as it is for a person to judge.
		counter := "the lock file " + path
		if req.Slots > 1 {
			base, _, _ := lease.ParseSlotName(req.Name)
			counter = "the lock files of its slots and " + s.tokenPath(base)
		}
		return fail(lease.TokenAheadError(req.Name, tok, clock, counter))
	}
	now := time.Now().UTC() // the record's clock; UTC spares a run reading the time zone
	rec := record{Name: req.Name, Holder: req.Label, ID: req.ID, Token: tok, Since: now, PID: os.Getpid(), Held: true, Updated: now, OFD: true}
	if err := writeRecord(rw, rec); err != nil {
		return fail(classified(err, "cannot write lock file "+path))
	}
	l := &fileLease{path: path, lockf: lockf, rw: rw, rec: rec, granted: clock.UTC(), lost: make(chan struct{})}
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
// shared locks stand in its way that no probe has marked as its own (an
// older version's probe, or someone else's flock(1) -s).
const probeTolerance = 50 * time.Millisecond

// probeWait bounds how long lockExclusive waits for a marked probe (see
// probeMark) to let go of its shared lock: a probe holds it for a few
// system calls, unless its thread is descheduled on a loaded host, which
// must not make a free lease look held (it did, past probeTolerance).
// Beyond this, a shared lock is not a probe's and counts as held.
const probeWait = 5 * time.Second

// probeMark is the byte offset of the OFD read lock a probe holds for as
// long as it holds its shared flock, so that an acquirer that finds only
// shared locks in its way can tell a probe (wait for it) from a foreign
// shared lock. Holders' OFD locks are tested below it (probe).
const probeMark = 1 << 62

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
		if probing(fd) {
			// A probe holds its shared lock for an instant: wait for it,
			// however long its thread is off the CPU (up to probeWait).
			if time.Since(deadline) > probeWait {
				return false, nil
			}
		} else if time.Now().After(deadline) {
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
