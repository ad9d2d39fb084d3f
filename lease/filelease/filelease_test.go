package filelease

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	})
}

func TestRemovedLockFileIsLost(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := s.TryAcquire(ctx, lease.Request{Name: "job", Holder: "a", ID: lease.NewID()})
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
	l2, err := s.TryAcquire(ctx, lease.Request{Name: "job", Holder: "b", ID: lease.NewID()})
	if err != nil {
		t.Fatalf("TryAcquire on a fresh file: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("old holder's Release: %v; want ErrLost", err)
	}
	if h, err := s.Status(ctx, "job"); err != nil || h == nil || h.Holder != "b" {
		t.Fatalf("Status = %+v, %v; want holder b", h, err)
	}
	_ = l2.Release(ctx)
}

func TestLockFileNotInherited(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", Holder: "a", ID: lease.NewID()})
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
