package filelease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// Standbys (lease.CandidateRegistry). The waiting instances of lease NAME
// are files in a directory next to its lock file,
//
//	DIR/NAME~candidates/ID    JSON {holder, priority, since, pid}
//
// each held with an OFD write lock by the process that registered it for as
// long as it waits. Liveness is that lock: the kernel drops it when the
// process dies, so a candidate needs no heartbeat, and a listing tests each
// file with F_OFD_GETLK (no lock taken). A file is written and locked under a
// dot-name and then renamed into place, so a listed file without a lock is
// always a dead candidate; the next Join removes such files. Like lock
// files, the directory is never removed.

var _ lease.CandidateRegistry = (*Store)(nil)

// candidateStep is the file store's δ: every standby is woken by inotify the
// moment the lock is dropped, and trying costs a few system calls; the rest
// is room for a loaded host's scheduler.
const candidateStep = 100 * time.Millisecond

// candDir returns the candidates directory of a lease name.
func (s *Store) candDir(name string) string {
	return s.auxPath(name, "candidates")
}

// candFile is a standby's record.
type candFile struct {
	Holder   string    `json:"holder"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
	PID      int       `json:"pid"`
}

// validID accepts the hex IDs lease.NewID makes, so an ID can never name
// anything outside the candidates directory.
func validID(id string) bool {
	return len(id) == 32 && strings.Trim(id, "0123456789abcdef") == ""
}

// Join registers c, unless this Store registered it already, and returns
// the number of live candidates. The registration lasts until Leave, Close,
// or the process's death; expiry is ignored.
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, _ time.Duration) (int, error) {
	if err := lease.ValidateName(name); err != nil {
		return 0, err
	}
	if !validID(c.ID) {
		return 0, newError(lease.ErrConfig, nil, fmt.Sprintf("candidate ID %q is not 32 hex digits", c.ID))
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.candMu.Lock()
	_, joined := s.cands[c.ID]
	s.candMu.Unlock()
	if !joined {
		if err := s.register(name, c); err != nil {
			return 0, err
		}
	}
	cs, err := s.candidates(name, true)
	return len(cs), err
}

// register writes, locks and publishes c's file.
func (s *Store) register(name string, c lease.Candidate) error {
	d, err := s.dirInfo(true)
	if err != nil {
		return err
	}
	dir := s.candDir(name)
	if err := unix.Mkdir(dir, d.mode&0o7777); err != nil && !errors.Is(err, unix.EEXIST) {
		return classified(err, "cannot create the candidates directory "+dir)
	} else if err == nil {
		adoptDir(dir, d)
	}
	tmp := filepath.Join(dir, ".join-"+c.ID)
	fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|openFlags, 0o600)
	if err != nil {
		return classified(err, "cannot create candidate file "+tmp)
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(err error) error {
		_ = os.Remove(tmp)
		f.Close()
		return err
	}
	if err := adopt(fd, d); err != nil {
		return fail(classified(err, "cannot set the permissions of "+tmp))
	}
	b, _ := json.Marshal(candFile{Holder: c.Label, Priority: c.Priority, Since: c.Since.UTC(), PID: os.Getpid()})
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fail(classified(err, "cannot write candidate file "+tmp))
	}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK}); err != nil {
		return fail(classified(err, "cannot lock candidate file "+tmp))
	}
	final := filepath.Join(dir, c.ID)
	if err := os.Rename(tmp, final); err != nil {
		return fail(classified(err, "cannot publish candidate file "+final))
	}
	s.candMu.Lock()
	defer s.candMu.Unlock()
	if s.cands == nil {
		s.cands = map[string]*os.File{}
	}
	s.cands[c.ID] = f
	return nil
}

// adoptDir gives a candidates directory this process just created the
// store directory's mode (the umask may have taken bits away) and, as adopt
// does for lock files, its group, or its owner when root creates it in a
// private directory. Best effort: a directory left root's only costs other
// users their place in the standby list.
func adoptDir(dir string, d dirInfo) {
	uid, gid := -1, -1
	switch {
	case d.group() && !d.world():
		gid = int(d.gid)
	case !d.group() && !d.world() && unix.Geteuid() == 0:
		uid, gid = int(d.uid), int(d.gid)
	}
	if uid != -1 || gid != -1 {
		_ = unix.Lchown(dir, uid, gid)
	}
	_ = unix.Chmod(dir, d.mode&0o7777)
}

// Leave removes the candidate id registered by this Store: its file goes,
// then its lock.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	if err := lease.ValidateName(name); err != nil {
		return err
	}
	s.candMu.Lock()
	f := s.cands[id]
	delete(s.cands, id)
	s.candMu.Unlock()
	if f == nil {
		return nil
	}
	err := os.Remove(filepath.Join(s.candDir(name), id))
	f.Close()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return classified(err, "cannot remove candidate file")
	}
	return nil
}

// closeCandidates drops every registration of this Store (Close).
func (s *Store) closeCandidates() {
	s.candMu.Lock()
	defer s.candMu.Unlock()
	for id, f := range s.cands {
		dir := filepath.Dir(f.Name())
		_ = os.Remove(filepath.Join(dir, id))
		f.Close()
	}
	s.cands = nil
}

// Candidates returns the live standbys of name in takeover order and the
// holder (nil when free). It never writes.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	h, holderID, err := s.status(name)
	if err != nil {
		return nil, nil, err
	}
	cs, err := s.candidates(name, false)
	if err != nil {
		return nil, nil, err
	}
	if holderID != "" {
		cs = slicesDelete(cs, holderID)
	}
	return cs, h, nil
}

func slicesDelete(cs []lease.Candidate, id string) []lease.Candidate {
	out := cs[:0]
	for _, c := range cs {
		if c.ID != id {
			out = append(out, c)
		}
	}
	return out
}

// candidates lists the live candidates of name; with prune, files of dead
// candidates are removed.
func (s *Store) candidates(name string, prune bool) ([]lease.Candidate, error) {
	dir := s.candDir(name)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, classified(err, "cannot read the candidates directory "+dir)
	}
	var cs []lease.Candidate
	for _, e := range ents {
		id := e.Name()
		if !validID(id) {
			continue
		}
		c, live := readCandidate(filepath.Join(dir, id))
		if !live {
			if prune {
				_ = os.Remove(filepath.Join(dir, id))
			}
			continue
		}
		c.ID = id
		cs = append(cs, c)
	}
	lease.SortCandidates(cs)
	return cs, nil
}

// readCandidate reads a candidate file and reports whether its process
// still holds its lock.
func readCandidate(path string) (lease.Candidate, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|openFlags, 0)
	if err != nil {
		return lease.Candidate{}, false
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK {
		return lease.Candidate{}, false
	}
	buf := make([]byte, 1024)
	n, _ := f.ReadAt(buf, 0)
	var r candFile
	if json.Unmarshal([]byte(strings.TrimSpace(string(buf[:n]))), &r) != nil {
		return lease.Candidate{}, false
	}
	return lease.Candidate{Label: r.Holder, Priority: r.Priority, Since: r.Since}, true
}

// CandidateTiming: no heartbeat (a lock is the liveness), δ candidateStep.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	return lease.CandidateTiming{Step: candidateStep}
}
