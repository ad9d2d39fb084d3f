package filelease

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
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

// Run history (lease.History). Each user keeps the runs it wrote of a lease
// in a file of its own beside the lease's lock file NAME.lock:
//
//	NAME~runs-UID       the runs uid UID wrote, one JSON lease.Run a line,
//	                    appended (a compaction writes them newest first);
//	                    owned by UID, mode 0644
//	NAME~runs-UID-lock  flock(2)ed by UID's writers, owned by UID, mode 0600
//
// A writer takes its lock (waiting at most historyLockWait, never
// unbounded: the lock is only ever held for an append or a compaction) and
// appends its record as one line (O_APPEND, one write): a run's start and,
// later, its end with the same token, which readers merge (the end wins).
// An end record written while its run still holds the lease (--once-per
// writes it before the release: the next holder decides by it, after a
// power loss too) is synced before the lock is dropped; a start record, and
// an end written after the release, are not (a power loss may lose them, as
// it may any best-effort history write).
// The writer of a start record compacts the file when it holds
// keep + 2·slack lines or more (slack = keep/10 + 1; a compaction leaves one
// line a run, its own start among them, each run then adds two: start and
// end) or more bytes than
// 2·(keep + slack) records can take (1 KiB each at most: junk grows it this
// way): it reads the file, drops what is not a valid run and the runs
// beyond the keep newest, writes the result to a new file
// (NAME~runs-UID~new-RANDOM; one that a killed compaction left is removed by
// the next), syncs it and renames it over the old one. So readers see from
// keep to keep + slack runs (more only when runs ended without their end
// record), a run costs an append each at its start and its end, and
// compaction comes once every slack runs. Readers take no lock: an append is
// one write and a rename is atomic; a line cut short (a writer killed in
// its write, a full disk) does not parse and is skipped, and the next
// append starts a line of its own.
//
// What the history promises on a shared directory: a record in NAME~runs-UID
// was written by a process of uid UID (or by root), because only UID may
// write a file it owns with mode 0644, and nobody else may rename over it or
// remove it in a sticky directory. A reader accepts a file only when its
// owner is the UID of its name and nobody else may write it, and only from
// the users the directory vouches for: in a directory that only its owner,
// or the members of its group, may write, every user who could create the
// file; in a world-writable (sticky) directory, where anyone may create
// files, the reader itself, root and the directory's owner. A record whose
// "name" is another lease is ignored. So another user of a world-writable
// directory can neither forge a run nor evict a real one; runs of a job that
// runs as another user are only seen there by that user, root and the
// directory's owner (share a group directory instead).
//
// Every name here is the lease's (with '/' as '%') followed by '~', which is
// in no lease name, so the lease name ends at the first '~' and no other
// lease's files (NAME2.lock, NAME2~k.lock, NAME2~...) can have a name, or a
// prefix that compaction removes, of these: lease x.runs-0.new-a is safe
// from x's compaction by construction.
//
// Older versions wrote NAME.runs-UID (and, before that, the one file all
// users shared, NAME.runs): these are still read, under the same rules, by
// their exact names, and never written, compacted or removed; their runs
// merge with the new file's and age out of what Runs returns as new runs
// come.

var _ lease.History = (*Store)(nil)

// maxRunsFile bounds what Runs reads of one file: MaxHistoryKeep records of
// well under 1 KiB each.
const maxRunsFile = lease.MaxHistoryKeep << 10

// historyLockWait bounds how long a writer waits for its history lock: the
// lock is held for one read and rewrite of a small file, so a lock held
// longer is not a writer of leaderrun's (a flock(1) of the same user or of
// root), and history is never worth a hung run.
const historyLockWait = 2 * time.Second

// runsBase returns the path prefix of a lease name's history files,
// DIR/NAME~runs.
func (s *Store) runsBase(name string) string {
	return s.auxPath(name, "runs")
}

// legacyRunsBase is runsBase of older versions, DIR/NAME.runs: read only.
func (s *Store) legacyRunsBase(name string) string {
	return strings.TrimSuffix(s.Path(name), ".lock") + ".runs"
}

// runsPath returns the history file of name that this process writes (its
// effective uid's).
func (s *Store) runsPath(name string) string {
	return s.userRunsPath(name, os.Geteuid())
}

// userRunsPath returns the history file of name written by uid.
func (s *Store) userRunsPath(name string, uid int) string {
	return s.runsBase(name) + "-" + strconv.Itoa(uid)
}

// RecordRun writes r into this user's history file of r.Name (see
// lease.History), creating the directory and the files if needed: it
// appends r, or compacts the file when r is a start record and the file
// holds more than its keep allows.
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	if err := lease.ValidateName(r.Name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.dirInfo(true); err != nil {
		return err
	}
	uid := os.Geteuid()
	path := s.runsPath(r.Name)
	lk, err := openOwn(path+"-lock", uid, unix.O_RDONLY, true)
	if err != nil {
		return err
	}
	defer lk.Close() // drops the flock
	if err := lockBounded(ctx, lk, historyLockWait); err != nil {
		return err
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := openOwn(path, uid, unix.O_RDWR|unix.O_APPEND, true)
	if err != nil {
		return err
	}
	defer f.Close()
	keep = lease.HistoryKeep(keep)
	if !r.Ended() {
		old, full, err := readForStart(f, keep)
		if err != nil {
			return err
		}
		if full {
			return compactRuns(path, old, r, keep)
		}
		return appendRun(f, old, line, false)
	}
	last, err := lastByte(f)
	if err != nil {
		return err
	}
	return appendRun(f, last, line, !s.releasedBy(r.Name, r.Token))
}

// releasedBy reports whether the lock file of name says that the holder
// with token has released it: an end record written after the release is
// best effort, one written before it (--once-per writes its end then, for
// the next holder to read) is synced. When the lock file cannot be read,
// it says not.
func (s *Store) releasedBy(name string, token uint64) bool {
	fd, err := unix.Open(s.Path(name), unix.O_RDONLY|openFlags, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), s.Path(name))
	defer f.Close()
	rec, err := readRecordOnce(f)
	return err == nil && rec.Token != 0 && !(rec.Held && rec.Token == token)
}

// slack is how many runs beyond keep a history file may gain before a
// start record compacts it.
func slack(keep int) int { return keep/10 + 1 }

// readForStart reads a history file whole for a start record: full
// reports that it holds keep + 2·slack lines or more, or
// more bytes than 2·(keep + slack) records can take, and so is to be
// compacted (then b is all it holds, up to maxRunsFile).
func readForStart(f *os.File, keep int) (b []byte, full bool, err error) {
	// Below what readers read (maxRunsFile), so that they see what was
	// appended last.
	limit := min(int64(2*(keep+slack(keep)))<<10, maxRunsFile*3/4)
	st, err := f.Stat()
	if err != nil {
		return nil, false, classified(err, "cannot read "+f.Name())
	}
	// One buffer of the file's size (writers hold the history's lock), not
	// io.ReadAll's doubling: a start reads the whole file at every run.
	b = make([]byte, min(st.Size(), maxRunsFile))
	m, err := io.ReadFull(io.NewSectionReader(f, 0, int64(len(b))), b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) { // shorter: cut by a writer that ignored the lock
		return nil, false, classified(err, "cannot read "+f.Name())
	}
	b = b[:m]
	full = int64(m) > limit
	return b, full || bytes.Count(b, []byte{'\n'}) >= keep+2*slack(keep), nil
}

// lastByte returns the last byte of f, or nothing when f is empty.
func lastByte(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, classified(err, "cannot read "+f.Name())
	}
	if st.Size() == 0 {
		return nil, nil
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, st.Size()-1); err != nil {
		return nil, classified(err, "cannot read "+f.Name())
	}
	return b, nil
}

// appendRun appends line (a record ending in no newline) to f, after a
// newline when what f held (its last bytes: before) does not end in one (a
// write cut short), making it mode 0644 and, with sync, syncing it.
func appendRun(f *os.File, before, line []byte, sync bool) error {
	if len(before) > 0 && before[len(before)-1] != '\n' {
		line = append([]byte{'\n'}, line...)
	}
	fail := func(err error) error { return classified(err, "cannot write "+f.Name()) }
	if err := unix.Fchmod(int(f.Fd()), 0o644); err != nil {
		return fail(err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fail(err)
	}
	if sync {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return fail(err)
		}
	}
	return nil
}

// compactRuns writes the history file path anew from old (what it held)
// with r: the newest keep valid runs, one line each.
func compactRuns(path string, old []byte, r lease.Run, keep int) error {
	removeStale(path)
	var runs []lease.Run
	sc := bufio.NewScanner(bytes.NewReader(old))
	sc.Buffer(make([]byte, 0, 4096), maxRunsFile)
	for sc.Scan() {
		var o lease.Run
		if json.Unmarshal(sc.Bytes(), &o) == nil && o.Token != 0 && o.Name == r.Name {
			runs = append(runs, o)
		}
	}
	if err := sc.Err(); err != nil {
		return classified(err, "cannot read "+path)
	}
	// The newest keep valid records: what is not one (another name's, a
	// token or time from the future) is dropped, never counted.
	runs = lease.NewestRuns(append(runs, r), runBounds(r.Name), keep)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, run := range runs {
		if err := enc.Encode(run); err != nil {
			return err
		}
	}
	return writeReplace(path, buf.Bytes())
}

// writeReplace writes b to a new file (mode 0644, whatever the umask),
// syncs it and renames it over path.
func writeReplace(path string, b []byte) error {
	var rnd [8]byte
	lease.Random(rnd[:])
	// A random name: another user of a shared directory cannot plant a file
	// in its way.
	tmp := tmpPrefix(path) + hex.EncodeToString(rnd[:])
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|openFlags, 0o600)
	if err != nil {
		return classified(err, "cannot create "+tmp)
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(err error) error {
		f.Close()
		_ = unix.Unlink(tmp)
		return classified(err, "cannot write "+path)
	}
	if err := unix.Fchmod(fd, 0o644); err != nil {
		return fail(err)
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = unix.Unlink(tmp)
		return classified(err, "cannot write "+path)
	}
	if err := unix.Rename(tmp, path); err != nil {
		_ = unix.Unlink(tmp)
		return classified(err, "cannot replace "+path)
	}
	return nil
}

// tmpPrefix starts the names of the new files that replace path.
func tmpPrefix(path string) string { return path + auxSep + "new-" }

// removeStale removes the new files that writers of this user killed
// between creating and renaming them left beside path; the lock is held,
// so none is being written. (The sticky bit keeps other users' files.)
func removeStale(path string) {
	dir := filepath.Dir(path) + "/"
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		if strings.HasPrefix(n, filepath.Base(tmpPrefix(path))) {
			var st unix.Stat_t
			if unix.Lstat(dir+n, &st) == nil && int(st.Uid) == os.Geteuid() {
				_ = unix.Unlink(dir + n)
			}
		}
	}
}

// openOwn opens a history file of this user (uid) with flag, never
// following a link nor blocking on a FIFO, and checks it is a regular file
// that uid owns and nobody else may write. With create, a missing file is
// made (mode 0600); without, a missing file returns an error wrapping
// os.ErrNotExist.
func openOwn(path string, uid, flag int, create bool) (*os.File, error) {
	for range 5 {
		fd, err := unix.Open(path, flag|openFlags, 0)
		if errors.Is(err, unix.ENOENT) && create {
			fd, err = unix.Open(path, flag|unix.O_CREAT|unix.O_EXCL|openFlags, 0o600)
			if errors.Is(err, unix.EEXIST) {
				continue // a writer of ours made it first: open it
			}
		}
		if errors.Is(err, unix.ENOENT) {
			return nil, os.ErrNotExist
		}
		if err != nil {
			return nil, historyOpenError(path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			f.Close()
			return nil, classified(err, "cannot read "+path)
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			f.Close()
			return nil, newError(lease.ErrConfig, nil, fmt.Sprintf("run history file %s is %s, not a regular file: remove it", path, fileKind(st.Mode)))
		case int(st.Uid) != uid:
			f.Close()
			return nil, newError(lease.ErrConfig, nil, fmt.Sprintf("run history file %s belongs to uid %d, not to uid %d that writes it: remove it (readers ignore it)", path, st.Uid, uid))
		case st.Mode&0o022 != 0:
			// Ours, but writable by others (made by hand): the rewrite
			// replaces the data file; the lock file is made private.
			_ = unix.Fchmod(fd, st.Mode&0o755)
		}
		return f, nil
	}
	return nil, newError(lease.ErrUnavailable, nil, "run history file "+path+" keeps appearing and disappearing")
}

// historyOpenError turns an open error of a history file into a sentence
// with its class.
func historyOpenError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return newError(lease.ErrConfig, nil, fmt.Sprintf("run history file %s is a symbolic link; leaderrun never follows links in the store directory: remove it", path))
	case errors.Is(err, unix.EISDIR):
		return newError(lease.ErrConfig, nil, fmt.Sprintf("run history file %s is a directory, not a regular file: remove it", path))
	case errors.Is(err, unix.ENXIO):
		return newError(lease.ErrConfig, nil, fmt.Sprintf("run history file %s is a FIFO or socket, not a regular file: remove it", path))
	}
	return classified(err, "cannot open run history file "+path)
}

// lockBounded takes the exclusive flock on f without ever blocking in
// flock(2) (which no signal or context interrupts): it retries with a
// growing pause until bound has passed or ctx ends, and then returns an
// *lease.Error wrapping lease.ErrUnavailable that names the lock file.
func lockBounded(ctx context.Context, f *os.File, bound time.Duration) error {
	start := time.Now()
	deadline := start.Add(bound)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	pause := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return classified(err, "cannot lock "+f.Name())
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return lease.NewError(fmt.Sprintf("lock file %s stayed locked by another process for %v (a leaderrun holds it for milliseconds; fuser %s names the process)",
				f.Name(), time.Since(start).Round(time.Millisecond), f.Name()), lease.ErrUnavailable, unix.EWOULDBLOCK)
		}
		_ = sleep(ctx, min(pause, left))
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Runs returns up to limit runs of name, newest first (see lease.History),
// from the history files of the users this store directory vouches for.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := s.dirInfo(false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, s.missingDir()
	}
	if err != nil {
		return nil, err
	}
	files, err := s.historyFiles(name, d)
	if err != nil {
		return nil, err
	}
	byToken := map[uint64]lease.Run{}
	for _, hf := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		runs, err := readRuns(hf, name, d)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			// The same token twice (a run recorded by a version that wrote
			// the shared file, then by this one): the one with an end wins.
			if o, ok := byToken[r.Token]; !ok || !o.Ended() && r.Ended() {
				byToken[r.Token] = r
			}
		}
	}
	runs := make([]lease.Run, 0, len(byToken))
	for _, r := range byToken {
		runs = append(runs, r)
	}
	return lease.NewestRuns(runs, runBounds(name), limit), nil
}

// runBounds are the records a history of name may hold: the file store's
// tokens are at least the acquiring host's clock in microseconds.
func runBounds(name string) lease.RunBounds {
	return lease.RunBounds{Name: name, Now: time.Now(), ClockTokens: true}
}

// historyFile is a history file of a lease and the uid its name says wrote
// it (-1: the shared file of older versions, written by anyone).
type historyFile struct {
	path string
	uid  int
}

// historyFiles lists the history files of name whose writer the directory
// vouches for (by the name: the owner is checked when reading).
func (s *Store) historyFiles(name string, d dirInfo) ([]historyFile, error) {
	dir, err := os.Open(s.dir)
	if err != nil {
		return nil, classified(err, "cannot read the file store directory "+s.dir)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, classified(err, "cannot read the file store directory "+s.dir)
	}
	legacy := s.legacyRunsBase(name)
	var files []historyFile
	for _, n := range names {
		if n == filepath.Base(legacy) {
			files = append(files, historyFile{path: legacy, uid: -1})
			continue
		}
		for _, base := range []string{s.runsBase(name), legacy} {
			rest, ok := strings.CutPrefix(n, filepath.Base(base)+"-")
			if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || len(rest) > 10 {
				continue
			}
			uid, err := strconv.Atoi(rest)
			if err != nil || !vouched(uint32(uid), d) {
				continue
			}
			files = append(files, historyFile{path: base + "-" + rest, uid: uid})
		}
	}
	return files, nil
}

// vouched reports whether the directory vouches for runs written by uid:
// in a directory that only its owner or its group may write, anyone who
// could create a file in it; in a world-writable one, this process's user,
// root and the directory's owner.
func vouched(uid uint32, d dirInfo) bool {
	if !d.world() {
		return true
	}
	return uid == uint32(os.Geteuid()) || uid == 0 || uid == d.uid
}

// readRuns reads the runs of name in one history file, or none when the
// file is missing or the directory does not vouch for it: not owned by
// the uid of its name, writable by someone else, not a regular file.
func readRuns(hf historyFile, name string, d dirInfo) ([]lease.Run, error) {
	fd, err := unix.Open(hf.path, unix.O_RDONLY|openFlags, 0)
	if err != nil {
		// Gone (a writer's rename is atomic, so only a removal), a link,
		// a socket, unreadable: not a history file.
		return nil, nil
	}
	f := os.NewFile(uintptr(fd), hf.path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, classified(err, "cannot read "+hf.path)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		if int(st.Uid) == hf.uid {
			// Made by the user it is named for (or root): its writer
			// fails on it too; say what is wrong.
			return nil, newError(lease.ErrConfig, nil, fmt.Sprintf("run history file %s is %s, not a regular file: remove it", hf.path, fileKind(st.Mode)))
		}
		return nil, nil // planted by someone else: not this reader's to judge
	}
	if !trustedFile(st, hf.uid, d) {
		return nil, nil
	}
	return parseRuns(f, name)
}

// trustedFile reports whether a history file with status st, named for uid
// (-1: the shared file of older versions), was written only by users the
// directory vouches for.
func trustedFile(st unix.Stat_t, uid int, d dirInfo) bool {
	if uid >= 0 && int(st.Uid) != uid || !vouched(st.Uid, d) {
		return false
	}
	switch {
	case st.Mode&0o002 != 0:
		return false
	case st.Mode&0o020 != 0:
		// The group writes it: the directory's group, in a directory
		// that group may write (the shared file of older versions).
		return !d.world() && d.group() && st.Gid == d.gid
	}
	return true
}

// parseRuns reads the runs of name in a history file from its start,
// newest first; a line that does not parse (a hand edit, a cut write) or
// that is another lease's is skipped.
func parseRuns(f *os.File, name string) ([]lease.Run, error) {
	runs := []lease.Run{}
	sc := bufio.NewScanner(io.NewSectionReader(f, 0, maxRunsFile))
	sc.Buffer(make([]byte, 0, 4096), maxRunsFile)
	for sc.Scan() {
		var r lease.Run
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Token != 0 && r.Name == name {
			runs = append(runs, r)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, classified(err, "cannot read "+f.Name())
	}
	slices.SortFunc(runs, func(a, b lease.Run) int { return compareDesc(a.Token, b.Token) })
	return runs, nil
}

// compareDesc orders tokens from the highest down.
func compareDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
