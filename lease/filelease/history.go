package filelease

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History): beside a lease's lock file NAME.lock lives
//
//	NAME.runs       the last runs, one JSON lease.Run a line, newest first
//	NAME.runs-lock  flock(2)ed by writers (exclusive) and readers (shared), never unlinked
//
// A writer locks NAME.runs-lock, reads NAME.runs, puts its record in, drops
// the oldest beyond the cap and rewrites the file in place (then fsyncs it);
// a reader holds the shared lock while it reads, so it always sees a whole
// file. In place, not renamed over: in a shared sticky directory (1777) a
// user may not rename over another user's file, but both may write it (the
// files get the lock files' mode, see perm.go). Neither name ends in ".lock",
// so no lease name can map to them. A crash in the middle of a rewrite can
// cut the file; lines that do not parse are skipped.

var _ lease.History = (*Store)(nil)

// maxRunsFile bounds what Runs reads: MaxHistoryKeep records of well under
// 1 KiB each.
const maxRunsFile = lease.MaxHistoryKeep << 10

// runsPath returns the history file of a lease name.
func (s *Store) runsPath(name string) string {
	return strings.TrimSuffix(s.Path(name), ".lock") + ".runs"
}

// RecordRun writes r into the history of r.Name (see lease.History),
// creating the directory and the files if needed.
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	if err := lease.ValidateName(r.Name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := s.dirInfo(true)
	if err != nil {
		return err
	}
	path := s.runsPath(r.Name)
	lk, err := openLock(path+"-lock", unix.O_RDWR, d, true)
	if err != nil {
		return err
	}
	defer lk.Close() // drops the flock
	if err := unix.Flock(int(lk.Fd()), unix.LOCK_EX); err != nil {
		return classified(err, "cannot lock "+lk.Name())
	}
	f, err := openLock(path, unix.O_RDWR, d, true)
	if err != nil {
		return err
	}
	defer f.Close()
	runs, err := parseRuns(f)
	if err != nil {
		return err
	}
	runs = slices.DeleteFunc(runs, func(o lease.Run) bool { return o.Token == r.Token })
	// The newest keep valid records: what is not one (another name's, a
	// token or time from the future) is dropped, never counted.
	runs = lease.NewestRuns(append(runs, r), runBounds(r.Name), lease.HistoryKeep(keep))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, run := range runs {
		if err := enc.Encode(run); err != nil {
			return err
		}
	}
	if _, err := f.WriteAt(buf.Bytes(), 0); err != nil {
		return classified(err, "cannot write "+path)
	}
	if err := f.Truncate(int64(buf.Len())); err != nil {
		return classified(err, "cannot write "+path)
	}
	if err := f.Sync(); err != nil {
		return classified(err, "cannot write "+path)
	}
	return nil
}

// Runs returns up to limit runs of name, newest first (see lease.History).
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := statDir(s.dir); errors.Is(err, os.ErrNotExist) {
		return nil, s.missingDir()
	} else if err != nil {
		return nil, err
	}
	runs, err := readRuns(s.runsPath(name))
	if err != nil {
		return nil, err
	}
	return lease.NewestRuns(runs, runBounds(name), limit), nil
}

// runBounds are the records a history of name may hold: the file store's
// tokens are at least the acquiring host's clock in microseconds.
func runBounds(name string) lease.RunBounds {
	return lease.RunBounds{Name: name, Now: time.Now(), ClockTokens: true}
}

// readRuns reads a history file under the shared lock; a missing one is
// an empty history.
func readRuns(path string) ([]lease.Run, error) {
	lfd, err := unix.Open(path+"-lock", unix.O_RDONLY|openFlags, 0)
	if errors.Is(err, unix.ENOENT) {
		return []lease.Run{}, nil // never written
	}
	if err != nil {
		return nil, classified(err, "cannot open "+path+"-lock")
	}
	defer unix.Close(lfd)
	if err := unix.Flock(lfd, unix.LOCK_SH); err != nil {
		return nil, classified(err, "cannot lock "+path+"-lock")
	}
	fd, err := unix.Open(path, unix.O_RDONLY|openFlags, 0)
	if errors.Is(err, unix.ENOENT) {
		return []lease.Run{}, nil
	}
	if err != nil {
		return nil, classified(err, "cannot open "+path)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return parseRuns(f)
}

// parseRuns reads the runs of a history file from its start, newest
// first; a line that does not parse (a hand edit, a cut write) is skipped.
func parseRuns(f *os.File) ([]lease.Run, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, classified(err, "cannot read "+f.Name())
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, newError(lease.ErrConfig, nil, f.Name()+" is "+fileKind(st.Mode)+", not a regular file: remove it")
	}
	runs := []lease.Run{}
	sc := bufio.NewScanner(io.NewSectionReader(f, 0, maxRunsFile))
	sc.Buffer(make([]byte, 0, 4096), maxRunsFile)
	for sc.Scan() {
		var r lease.Run
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Token != 0 {
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
