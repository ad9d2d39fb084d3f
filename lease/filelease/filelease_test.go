package filelease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// replaceFile swaps path for a copy of itself (a new inode with the same
// content), as a config-management tool or an editor would.
func replaceFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	leasetest.Run(t, leasetest.Harness{
		TrimsAtStart: true, // the run history compacts at a start record
		Open: func(t *testing.T) lease.Store {
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Break: func(t *testing.T, s lease.Store, name string) {
			replaceFile(t, s.(*Store).Path(name))
		},
		Abandon: func(t *testing.T, l lease.Lease) { l.(*fileLease).abandon() },
		PutRunEntry: func(t *testing.T, name string, _ uint64, value []byte) {
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(s.runsPath(name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err == nil {
				_, err = f.Write(append(value, '\n'))
				err = errors.Join(err, f.Close())
			}
			if err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestRemovedLockFileIsLost(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := s.TryAcquire(ctx, lease.Request{Name: "job", Label: "a", ID: lease.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.Path("job")); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after the lock file was removed: %v; want ErrLost", err)
	}
	// A newcomer gets a fresh file; the old holder must not be able to release it.
	l2, err := s.TryAcquire(ctx, lease.Request{Name: "job", Label: "b", ID: lease.NewID()})
	if err != nil {
		t.Fatalf("TryAcquire on a fresh file: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("old holder's Release: %v; want ErrLost", err)
	}
	if h, err := s.Status(ctx, "job"); err != nil || h == nil || h.Label != "b" {
		t.Fatalf("Status = %+v, %v; want holder b", h, err)
	}
	_ = l2.Release(ctx)
}

func TestLockFileNotInherited(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", Label: "a", ID: lease.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	fl := l.(*fileLease)
	for _, f := range []*os.File{fl.lockf, fl.rw} {
		flags, err := unixFcntlGetfd(f)
		if err != nil || flags&1 == 0 { // FD_CLOEXEC
			t.Fatalf("descriptor %s flags %#x, %v: want FD_CLOEXEC so the child cannot inherit the lock", f.Name(), flags, err)
		}
	}
}

func TestNamesWithSlashes(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := s.Path("team/job"), s.Path("team%job"); a != b || filepath.Dir(a) != s.Dir() {
		// "team%job" is not a valid name, so the mapping stays one-to-one.
		if filepath.Dir(a) != s.Dir() {
			t.Fatalf("Path(team/job) = %s escapes %s", a, s.Dir())
		}
	}
	if err := lease.ValidateName("team%job"); err == nil {
		t.Fatal("'%' must not be allowed in names: it is the escape of '/'")
	}
	for _, bad := range []string{"", "..", "a/../b", "/abs", "a//b", strings.Repeat("x", 201), "sp ace"} {
		if _, err := s.TryAcquire(context.Background(), lease.Request{Name: bad, ID: lease.NewID()}); !errors.Is(err, lease.ErrBadName) {
			t.Errorf("TryAcquire(%q): %v; want ErrBadName", bad, err)
		}
	}
}

func TestRelativeDirRefused(t *testing.T) {
	if _, err := Open("relative/dir"); !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Open(relative): %v; want ErrConfig", err)
	}
}

func openT(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func acquireT(t *testing.T, s *Store, name string) *fileLease {
	t.Helper()
	l, err := s.TryAcquire(context.Background(), lease.Request{Name: name, Label: "h", ID: lease.NewID()})
	if err != nil {
		t.Fatalf("TryAcquire(%s): %v", name, err)
	}
	return l.(*fileLease)
}

// Tokens are at least the wall clock in microseconds, so they never go back
// when the lock file is deleted or truncated, and they stay below 2^53.
func TestTokensNeverGoBack(t *testing.T) {
	s := openT(t, t.TempDir())
	path := s.Path("job")
	var last uint64
	next := func(what string) {
		t.Helper()
		before := uint64(s.now().UnixMicro())
		l := acquireT(t, s, "job")
		tok := l.Info().Token
		if tok <= last || tok < before || tok > MaxToken {
			t.Fatalf("%s: token %d; want > previous %d, >= the clock %d, <= 2^53-1", what, tok, last, before)
		}
		last = tok
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		next("in a row")
	}
	must(t, os.Remove(path))
	next("after the lock file was deleted")
	must(t, os.Truncate(path, 0))
	next("after the lock file was truncated")
	must(t, os.WriteFile(path, []byte(`{"name":"job","token":1,"held":false}`+"\n"), 0o600))
	next("after the counter was set back")

	// A clock that steps back (by less than lease.MaxClockSkew: further is
	// refused, TestCounterAheadOfClockRefused): the counter alone keeps
	// tokens increasing.
	back := time.Now().Add(-lease.MaxClockSkew + time.Minute)
	s.now = func() time.Time { return back }
	next("with the clock stepped back")
	next("with the clock stepped back, again")
}

// A counter at or above 2^53 (here tampered with) is refused as corrupt; it
// never wraps or loses precision. A counter at 2^53−1 is valid, but has
// issued the last token: the next acquisition is refused as such, not as
// "corrupt … not below 2^53" (it is below).
func TestHugeCounterRefused(t *testing.T) {
	s := openT(t, t.TempDir())
	must(t, os.WriteFile(s.Path("job"), []byte(`{"name":"job","token":9007199254740991,"held":false}`+"\n"), 0o600))
	_, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID()})
	if !errors.Is(err, lease.ErrConfig) || strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "has reached 2^53−1") {
		t.Errorf("counter 2^53-1: %v; want a configuration error saying the last token was issued", err)
	}
	for _, c := range []string{"9007199254740992", "18446744073709551615", "18446744073709551616", "-1", "1e20"} {
		must(t, os.WriteFile(s.Path("job"), []byte(`{"name":"job","token":`+c+`,"held":false}`+"\n"), 0o600))
		_, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID()})
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("counter %s: %v; want a configuration error saying the file is corrupt", c, err)
		}
	}
	// A counter this high is far ahead of today's clock (refused as such):
	// the last tokens are reached with a clock there.
	at := time.Now()
	s.now = func() time.Time { return time.UnixMicro(MaxToken).Add(-10*time.Second + time.Since(at)) }
	must(t, os.WriteFile(s.Path("job"), []byte(`{"name":"job","token":9007199254740990,"held":false}`+"\n"), 0o600))
	l := acquireT(t, s, "job")
	defer l.Release(context.Background())
	if l.Info().Token != MaxToken {
		t.Fatalf("token %d; want 2^53-1", l.Info().Token)
	}
	must(t, l.Release(context.Background()))
	_, err = s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID()})
	if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "has reached 2^53−1") {
		t.Errorf("after the last token: %v; want the counter reported exhausted", err)
	}
}

// Deleting, moving or replacing the lock file makes the running lease lost
// at once (Lost closes; no Renew needed), and the next holder's token is
// larger. A change of mode (IN_ATTRIB too) does not make it lost.
func TestLockFileWatched(t *testing.T) {
	checked := make(chan struct{}, 16)
	hook := func() { checked <- struct{}{} }
	afterCheck.Store(&hook)
	defer afterCheck.Store(nil)
	old := watchDelay
	watchDelay = 0
	defer func() { watchDelay = old }()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"deleted", func(t *testing.T, p string) { must(t, os.Remove(p)) }},
		{"moved away", func(t *testing.T, p string) { must(t, os.Rename(p, p+".old")) }},
		{"replaced", func(t *testing.T, p string) { replaceFile(t, p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, t.TempDir())
			l := acquireT(t, s, "job")
			defer l.Release(context.Background())
			path := s.Path("job")
			<-checked // armed
			// A chmod is checked and ignored.
			must(t, os.Chmod(path, 0o640))
			<-checked
			select {
			case <-l.Lost():
				t.Fatal("a chmod made the lease lost")
			default:
			}
			tc.change(t, path)
			select {
			case <-l.Lost():
			case <-time.After(30 * time.Second):
				t.Fatal("Lost not closed 30s after the lock file was " + tc.name)
			}
			if err := l.Renew(context.Background()); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("Renew: %v; want ErrLost", err)
			}
			l2 := acquireT(t, s, "job")
			if l2.Info().Token <= l.Info().Token {
				t.Fatalf("new holder's token %d <= the running holder's %d", l2.Info().Token, l.Info().Token)
			}
			_ = l2.Release(context.Background())
		})
	}
}

// Release drops the lock with flock(LOCK_UN) before closing, so a duplicate
// of the lock descriptor still open (in a guard process, say) does not keep
// the lease.
func TestReleaseUnlocksDuplicates(t *testing.T) {
	s := openT(t, t.TempDir())
	l := acquireT(t, s, "job")
	dup, err := unix.Dup(int(l.lockf.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dup)
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	l2 := acquireT(t, s, "job")
	_ = l2.Release(context.Background())
}

// A status probe never makes a free lease look held to an acquirer. The
// holders here crash (abandon), so their records say held and every Status
// call probes the lock.
func TestStatusProbeNeverBlocksAcquirers(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var probes atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := s.Status(ctx, "job"); err != nil {
					t.Error(err)
					return
				}
				probes.Add(1)
			}
		}()
	}
	conflicts := 0
	const n = 1000
	for i := 0; i < n; i++ {
		l, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID()})
		if errors.Is(err, lease.ErrHeld) {
			conflicts++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		l.(*fileLease).abandon()
	}
	cancel()
	wg.Wait()
	if conflicts != 0 {
		t.Fatalf("%d of %d acquisitions of a free lease reported it held while %d status probes ran", conflicts, n, probes.Load())
	}
}

// A probe whose thread is off the CPU while it holds its shared flock (as
// on a loaded host: e2e saw a free lease reported held while status
// probes ran) does not make a free lease look held: the acquirer waits for
// the marked probe, however long past probeTolerance, and takes the lease
// once it lets go. A shared lock without a probe's mark (flock(1) -s of
// someone else) still counts as held after probeTolerance.
func TestDescheduledProbeNeverBlocksAcquirers(t *testing.T) {
	s := openT(t, t.TempDir())
	l := acquireT(t, s, "job")
	must(t, l.Release(context.Background()))
	f, err := os.Open(s.Path("job"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The probe's steps, stopped after its shared lock: mark, lock.
	mark := unix.Flock_t{Type: unix.F_RDLCK, Start: probeMark, Len: 1}
	must(t, unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &mark))
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB))
	// It resumes 4·probeTolerance later: unlock, unmark.
	resumed := make(chan struct{})
	timer := time.AfterFunc(4*probeTolerance, func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		mark.Type = unix.F_UNLCK
		_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &mark)
		close(resumed)
	})
	defer timer.Stop()
	got, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", Label: "a", ID: lease.NewID()})
	if err != nil {
		t.Fatalf("TryAcquire while a probe holds its shared lock: %v; want the lease once the probe let go", err)
	}
	select {
	case <-resumed:
	default:
		t.Fatal("the lease was granted while the probe's shared lock was held")
	}
	must(t, got.Release(context.Background()))

	// An unmarked shared lock: held, after probeTolerance.
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB))
	_, err = s.TryAcquire(context.Background(), lease.Request{Name: "job", Label: "b", ID: lease.NewID()})
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("TryAcquire with a foreign shared lock: %v; want held", err)
	}
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_UN))
}

// Status and Runs are reads: on a directory that does not exist they create
// nothing and say so, naming it (a mistyped --store read as a free lease
// that never ran); the first acquisition makes the directory.
func TestStatusCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "store")
	s := openT(t, dir)
	if h, err := s.Status(context.Background(), "job"); h != nil || !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "the file store directory "+dir+" does not exist") {
		t.Fatalf("Status = %v, %v; want ErrConfig naming %s", h, err, dir)
	}
	if _, _, err := s.Candidates(context.Background(), "job"); !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("Candidates: %v; want ErrConfig", err)
	}
	if runs, err := s.Runs(context.Background(), "job", 0); runs != nil || !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Runs = %v, %v; want ErrConfig naming %s", runs, err, dir)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Status created %s (%v)", filepath.Dir(dir), err)
	}
	l := acquireT(t, s, "job")
	_ = l.Release(context.Background())
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the first acquisition made %s: %v, %v; want a 0700 directory", dir, fi, err)
	}
}

// A store that cannot hold lock files is a configuration error at once, not
// an unavailable store to retry.
func TestUnusableStoreIsConfigError(t *testing.T) {
	for _, dir := range []string{"/proc/self", "/proc", "/sys/kernel"} {
		if _, err := Open(dir); !errors.Is(err, lease.ErrConfig) {
			t.Errorf("Open(%s): %v; want ErrConfig", dir, err)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o600))
	if _, err := Open(file); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open(a file): %v; want ErrConfig saying not a directory", err)
	}
	s := openT(t, t.TempDir())
	must(t, os.Mkdir(s.Path("job"), 0o700))
	_, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID()})
	if !errors.Is(err, lease.ErrConfig) || err.Error() != "lock file "+s.Path("job")+" is a directory, not a regular file: remove it" {
		t.Fatalf("TryAcquire on a directory: %q; want a one-sentence configuration error", err)
	}
}

func TestCandidates(t *testing.T) {
	dir := t.TempDir()
	leasetest.RunCandidates(t, leasetest.Harness{
		Open: func(t *testing.T) lease.Store {
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

// A standby whose process died (its descriptor closed without Leave) is no
// longer listed, and the next Join removes its file.
func TestDeadCandidateIsNotListed(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	dead := lease.Candidate{ID: lease.NewID(), Label: "dead", Since: time.Now()}
	if _, err := a.Join(ctx, "job", dead, 0); err != nil {
		t.Fatal(err)
	}
	if cs, _, err := b.Candidates(ctx, "job"); err != nil || len(cs) != 1 {
		t.Fatalf("candidates %+v, %v; want the one joined", cs, err)
	}
	a.candMu.Lock()
	a.cands[dead.ID].Close() // as the kernel does when the process dies
	delete(a.cands, dead.ID)
	a.candMu.Unlock()
	if cs, _, err := b.Candidates(ctx, "job"); err != nil || len(cs) != 0 {
		t.Fatalf("candidates %+v, %v; want none after the standby died", cs, err)
	}
	live := lease.Candidate{ID: lease.NewID(), Label: "live", Since: time.Now()}
	if n, err := b.Join(ctx, "job", live, 0); err != nil || n != 1 {
		t.Fatalf("Join: %d live, %v; want 1", n, err)
	}
	if _, err := os.Stat(filepath.Join(b.candDir("job"), dead.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dead standby's file is still there: %v", err)
	}
}

// An idle waiter sleeps through the fallback interval while the lease stays
// held: Wait returns only when the lease may be free (or ctx ends), so an
// idle standby never goes round Acquire's loop, which lists every other
// standby (with N standbys, N² work per interval).
func TestWaitSleepsThroughPollWhileHeld(t *testing.T) {
	dir := t.TempDir()
	holder, waiter := openT(t, dir), openT(t, dir)
	l := acquireT(t, holder, "idle")
	defer l.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*PollInterval+PollInterval/2)
	defer cancel()
	if err := waiter.Wait(ctx, "idle", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a held lease returned %v before its context ended; want it to sleep on", err)
	}
	// And it still wakes at once when the lease is released.
	done := make(chan error, 1)
	go func() { done <- waiter.Wait(context.Background(), "idle", nil) }()
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after the release: %v", err)
	}
}

// Without an inotify instance (more waiting processes of one user than
// fs.inotify.max_user_instances), a waiter polls inside Wait: it returns
// only once the lease looks free, never on each poll.
func TestPollingWaitReturnsOnlyWhenFree(t *testing.T) {
	dir := t.TempDir()
	holder, waiter := openT(t, dir), openT(t, dir)
	l := acquireT(t, holder, "polled")
	ctx, cancel := context.WithTimeout(context.Background(), 2*PollInterval+PollInterval/2)
	defer cancel()
	if err := waiter.pollUntilFree(ctx, waiter.Path("polled"), false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pollUntilFree on a held lease returned %v before its context ended", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := waiter.pollUntilFree(context.Background(), waiter.Path("polled"), false); err != nil {
		t.Fatalf("pollUntilFree after the release: %v", err)
	}
}

// A waiter is woken only by changes of its own lease: other leases taken
// and released in the same directory, their history written, their
// standbys joining and leaving, reads of its own lease, reach it as no
// event at all (each reached every waiter of the directory, so N idle
// standbys of N leases cost N² wake-ups); its holder's release is one event.
func TestWaitWokenOnlyByItsLease(t *testing.T) {
	dir := t.TempDir()
	holder, waiter, other := openT(t, dir), openT(t, dir), openT(t, dir)
	l := acquireT(t, holder, "mine")
	armed := make(chan struct{}, 1)
	f := func() {
		select {
		case armed <- struct{}{}:
		default:
		}
	}
	waitArmed.Store(&f)
	defer waitArmed.Store(nil)
	done := make(chan error, 1)
	go func() { done <- waiter.Wait(context.Background(), "mine", nil) }()
	<-armed
	const changes = 20
	ctx := context.Background()
	for i := range changes {
		ol := acquireT(t, other, "theirs")
		if err := other.RecordRun(ctx, lease.Run{Name: "theirs", Token: ol.Info().Token, Start: time.Now()}, 0); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%032x", i+1)
		if _, err := other.Join(ctx, "theirs", lease.Candidate{ID: id, Since: time.Now()}, 0); err != nil {
			t.Fatal(err)
		}
		if err := other.Leave(ctx, "theirs", id); err != nil {
			t.Fatal(err)
		}
		if err := ol.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if h, err := other.Status(ctx, "mine"); err != nil || h == nil {
			t.Fatalf("Status(mine) = %v, %v; want held", h, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while its lease stayed held", err)
	default:
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after the release: %v", err)
	}
	// Events are queued in order: by the time the release's was read,
	// every earlier one had been.
	if n := waiter.events.Load(); n != 1 {
		t.Fatalf("the waiter read %d events for %d changes of another lease and one release of its own; want 1", n, 4*changes)
	}
}
