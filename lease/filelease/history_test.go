package filelease

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// foreignFlock holds an exclusive flock on path from a separate process,
// flock(1), until the test ends, and returns once the lock is taken.
func foreignFlock(t *testing.T, path string) {
	t.Helper()
	fl := exec.Command("flock", "-x", path, "sh", "-c", "echo locked; exec sleep 300")
	fl.SysProcAttr = &unix.SysProcAttr{Setpgid: true} // killed with the sleep that holds the lock
	out, err := fl.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.Start(); err != nil {
		t.Skipf("flock(1) from util-linux: %v", err)
	}
	t.Cleanup(func() { _ = unix.Kill(-fl.Process.Pid, unix.SIGKILL); _ = fl.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("flock(1) said %q, %v", line, err)
	}
}

func okRun(name string, tok uint64) lease.Run {
	now := time.Now().UTC()
	return lease.Run{Name: name, Label: "test", Token: tok, Start: now, End: now, Outcome: lease.OutcomeOK}
}

func tokens(runs []lease.Run) []uint64 {
	var ts []uint64
	for _, r := range runs {
		ts = append(ts, r.Token)
	}
	return ts
}

// A history lock held by another process (flock(1) of the same user, which
// is all the lock file's mode lets open it) delays a writer by at most
// historyLockWait, or the caller's context if that ends first, and then
// fails as unavailable, naming the lock file; readers take no lock and
// answer at once. A foreign lock on the shared lock file of older versions
// (NAME.runs-lock, 0666 in a 1777 directory) is no longer in anyone's way.
func TestHistoryLockIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := context.Background()
	if err := s.RecordRun(ctx, okRun("hl", 1), 0); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(dir, "hl.runs-lock")
	if err := os.WriteFile(legacy, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	foreignFlock(t, legacy)
	if err := s.RecordRun(ctx, okRun("hl", 2), 0); err != nil {
		t.Fatalf("RecordRun with a foreign lock on %s: %v; want no effect", legacy, err)
	}

	own := s.userRunsPath("hl", os.Geteuid()) + "-lock"
	foreignFlock(t, own)
	began := time.Now()
	err := s.RecordRun(ctx, okRun("hl", 3), 0)
	took := time.Since(began)
	var le *lease.Error
	if !errors.Is(err, lease.ErrUnavailable) || !errors.As(err, &le) || !strings.Contains(err.Error(), own) {
		t.Fatalf("RecordRun with a foreign lock on %s = %v; want a *lease.Error, unavailable, naming the lock file", own, err)
	}
	t.Logf("RecordRun gave up after %v: %v", took, err)
	if took < historyLockWait || took > 10*historyLockWait {
		t.Fatalf("RecordRun gave up after %v; want after its bound %v", took, historyLockWait)
	}
	// The caller's context bounds it too.
	cctx, cancel := context.WithTimeout(ctx, historyLockWait/20)
	defer cancel()
	began = time.Now()
	if err := s.RecordRun(cctx, okRun("hl", 3), 0); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("RecordRun with a short context = %v; want unavailable", err)
	}
	if took := time.Since(began); took >= historyLockWait {
		t.Fatalf("RecordRun with a %v context took %v", historyLockWait/20, took)
	}
	runs, err := s.Runs(ctx, "hl", 0)
	if err != nil || fmt.Sprint(tokens(runs)) != "[2 1]" {
		t.Fatalf("Runs while the lock is held = %v, %v; want tokens 2 1", tokens(runs), err)
	}
}

// A FIFO (or a directory, or a link) under the name of a history file or
// its lock never blocks: the writer says what is wrong at once; a reader
// reports its own file and ignores other users'.
func TestHistoryFIFO(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"-lock", ""} {
		t.Run("runs"+which, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openT(t, dir)
			p := s.userRunsPath("ff", os.Geteuid()) + which
			if err := unix.Mkfifo(p, 0o666); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.RecordRun(context.Background(), okRun("ff", 1), 0) }()
			select {
			case err := <-done:
				if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "FIFO") {
					t.Fatalf("RecordRun with a FIFO at %s = %v; want a configuration error naming it", p, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("RecordRun hangs on a FIFO at %s", p)
			}
			runs, err := s.Runs(context.Background(), "ff", 0)
			if which == "" && (!errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "FIFO")) {
				t.Fatalf("Runs with a FIFO as its own history file = %v, %v; want a configuration error", runs, err)
			}
			if which != "" && (err != nil || len(runs) != 0) {
				t.Fatalf("Runs = %v, %v; want none", runs, err)
			}
		})
	}
}

// Another user of a world-writable directory can neither forge a run nor
// evict one: lines it appends to the shared file of older versions, to a
// file named for another uid, or to its own file are not read by anyone
// else (but root and the directory's owner, which it is not); it cannot
// write root's file. A record whose "name" is another lease is ignored. In a
// group directory, the group's runs count for everyone.
func TestHistoryForgery(t *testing.T) {
	requireRoot(t)
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	dir := mkStore(t, 0o777|os.ModeSticky, 0, 0)
	s, err := OpenWith(dir, Options{World: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	real := okRun("nightly", 100)
	real.Outcome, real.ExitCode = lease.OutcomeFailed, 1
	if err := s.RecordRun(ctx, real, 0); err != nil {
		t.Fatal(err)
	}
	forged := func(name string, tok int) string {
		return fmt.Sprintf(`{"name":%q,"holder":"forged","token":%d,"start":"%s","end":"%s","outcome":"ok","exit_code":0}`,
			name, tok, time.Now().UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano))
	}
	if got := as(t, other, "append", dir, "nightly.runs", forged("nightly", 200)); got != "ok" {
		t.Fatalf("appending to the shared file as %v: %s", other, got)
	}
	if got := as(t, other, "append", dir, "nightly~runs-0", forged("nightly", 201)); !strings.HasPrefix(got, "err") {
		t.Fatalf("appending to root's history file as %v: %s; want refused", other, got)
	}
	// Files of older versions' names are read too: one planted under
	// root's name is not root's.
	if got := as(t, other, "append", dir, "nightly.runs-0", forged("nightly", 203)); got != "ok" {
		t.Fatalf("planting an old-style file for root as %v: %s", other, got)
	}
	if got := as(t, other, "append", dir, fmt.Sprintf("nightly~runs-%d", nobody.uid), forged("nightly", 202)); got != "ok" {
		t.Fatalf("planting a file for %v as %v: %s", nobody, other, got)
	}
	if got := as(t, other, "record", dir, "nightly", "300"); got != "ok" {
		t.Fatalf("recording a run as %v: %s", other, got)
	}
	if got := as(t, other, "append", dir, fmt.Sprintf("nightly~runs-%d", other.uid), forged("nightly", 301)); got != "ok" {
		t.Fatalf("appending to its own file as %v: %s", other, got)
	}
	// Root's own file, with a record of another lease.
	f, err := os.OpenFile(s.userRunsPath("nightly", 0), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, forged("weekly", 400))
	f.Close()

	runs, err := s.Runs(ctx, "nightly", 0)
	if err != nil || fmt.Sprint(tokens(runs)) != "[100]" || runs[0].Outcome != lease.OutcomeFailed {
		t.Fatalf("root reads %v, %v; want only its own failed run 100", tokens(runs), err)
	}
	if got := as(t, nobody, "runs", dir, "nightly"); got != "runs 100" {
		t.Fatalf("%v reads %q; want root's run only", nobody, got)
	}
	// other trusts what it wrote itself, forged or not, and root's.
	if got := as(t, other, "runs", dir, "nightly"); got != "runs 301 300 200 100" {
		t.Fatalf("%v reads %q; want its own runs and root's", other, got)
	}
	// A lock file squatted under root's name: root's writer says so, at once.
	if got := as(t, other, "append", dir, "weekly~runs-0-lock", ""); got != "ok" {
		t.Fatalf("squatting as %v: %s", other, got)
	}
	err = s.RecordRun(ctx, okRun("weekly", 1), 0)
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "weekly~runs-0-lock") || !strings.Contains(err.Error(), fmt.Sprint(other.uid)) {
		t.Fatalf("RecordRun with a squatted lock file = %v; want a configuration error naming it and its owner", err)
	}

	t.Run("group", func(t *testing.T) {
		dir := mkStore(t, 0o775|os.ModeSetgid, 0, jobs)
		if got := as(t, other, "record", dir, "nightly", "500"); got != "ok" {
			t.Fatalf("recording a run as %v: %s", other, got)
		}
		if got := as(t, nobody, "runs", dir, "nightly"); got != "runs 500" {
			t.Fatalf("%v reads %q; want the run of %v (same group)", nobody, got, other)
		}
	})
}

// A compaction killed between creating its new file and renaming it leaves
// the file behind; the next compaction of the user removes it.
func TestHistoryStaleNewFileRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openT(t, dir)
	stale := tmpPrefix(s.userRunsPath("st", os.Geteuid())) + "0123456789abcdef"
	if err := os.WriteFile(stale, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// keep 1: the start record of the fourth run finds three lines, more
	// than keep + 2·slack allows, and compacts.
	for i := range uint64(3) {
		if err := s.RecordRun(context.Background(), okRun("st", i+1), 1); err != nil {
			t.Fatal(err)
		}
	}
	start := okRun("st", 4)
	start.End, start.Outcome = time.Time{}, ""
	if err := s.RecordRun(context.Background(), start, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after a compaction: %v; want removed", stale, err)
	}
	if runs, err := s.Runs(context.Background(), "st", 0); err != nil || len(runs) != 1 || runs[0].Token != start.Token {
		t.Fatalf("Runs after the compaction keeping 1 = %+v, %v; want the fourth run alone", runs, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := fmt.Sprintf("[st~runs-%d st~runs-%d-lock]", os.Geteuid(), os.Geteuid()); fmt.Sprint(names) != want {
		t.Fatalf("store directory holds %v; want %s", names, want)
	}
}

// A run appends its start and its end to the history file (no rewrite,
// which cost a run a read of the whole file, a new file, an fsync and a
// rename each time); the start of the run past keep + slack compacts it to
// the keep newest runs, one line each. A line cut short (a writer killed in
// its write) is skipped, and the next record starts a line of its own.
func TestHistoryAppendsAndCompacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openT(t, t.TempDir())
	path := s.userRunsPath("ap", os.Geteuid())
	record := func(tok uint64, keep int) {
		t.Helper()
		end := okRun("ap", tok)
		start := end
		start.End, start.Outcome = time.Time{}, ""
		for _, r := range []lease.Run{start, end} {
			if err := s.RecordRun(ctx, r, keep); err != nil {
				t.Fatalf("RecordRun(%+v): %v", r, err)
			}
		}
	}
	inode := func() (uint64, int) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o777 != 0o644 {
			t.Errorf("%s has mode %o; want 0644", path, st.Mode&0o777)
		}
		return st.Ino, strings.Count(string(b), "\n")
	}
	record(1, 5)
	ino, lines := inode()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"name":"ap","tok`); err != nil { // cut short
		t.Fatal(err)
	}
	f.Close()
	for tok := uint64(2); tok <= 3; tok++ {
		record(tok, 5)
	}
	// keep 5, slack 1: compaction at a start that finds 7 lines; two more
	// runs of two lines each, and the cut line, now ended, make 7.
	if i, n := inode(); i != ino || n != lines+5 {
		t.Fatalf("after two more runs: inode %d, %d lines; want inode %d (appended), %d lines", i, n, ino, lines+5)
	}
	if runs, err := s.Runs(ctx, "ap", 0); err != nil || fmt.Sprint(tokens(runs)) != "[3 2 1]" || !runs[0].Ended() {
		t.Fatalf("Runs = %+v, %v; want tokens 3, 2, 1, ended", runs, err)
	}
	record(4, 3) // its start finds 7 lines, keep + 2·slack = 5 or more: the keep is the writer's
	if i, n := inode(); i == ino || n != 4 {
		t.Fatalf("after the run past keep + slack: inode %d (was %d), %d lines; want a new file of 3 runs and the end appended", i, ino, n)
	}
	if runs, err := s.Runs(ctx, "ap", 0); err != nil || fmt.Sprint(tokens(runs)) != "[4 3 2]" || !runs[0].Ended() {
		t.Fatalf("Runs after the compaction = %+v, %v; want tokens 4, 3, 2", runs, err)
	}
}

// An end record is synced when its run still holds the lease (--once-per
// writes it before the release, for the next holder to read), not after
// the release: releasedBy tells the two apart from the lock file, and says
// "not released" when it cannot tell.
func TestHistoryReleasedBy(t *testing.T) {
	t.Parallel()
	s := openT(t, t.TempDir())
	if s.releasedBy("rb", 1) {
		t.Fatal("releasedBy with no lock file = true; want false (sync when unsure)")
	}
	l := acquireT(t, s, "rb")
	tok := l.Info().Token
	if s.releasedBy("rb", tok) {
		t.Fatal("releasedBy while held = true; want false")
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.releasedBy("rb", tok) {
		t.Fatal("releasedBy after the release = false; want true")
	}
	l2 := acquireT(t, s, "rb")
	defer l2.Release(context.Background())
	if !s.releasedBy("rb", tok) {
		t.Fatal("releasedBy with the next holder's token in the lock file = false; want true")
	}
}
