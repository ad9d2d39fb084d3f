package filelease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// Two unprivileged users (one without a passwd entry) and root, sharing a
// store directory; the group ones are in group jobs.
const jobs = 54320

var (
	nobody = runAs{uid: 65534, gid: 65534, groups: []uint32{jobs}}
	other  = runAs{uid: 54321, gid: 54399, groups: []uint32{jobs}}
)

// A directory shared by users works whether it is world-writable and sticky
// (like /run/lock) or group-writable with or without the setgid bit: each
// user can take the lease after another released it, and is told "held",
// not "permission denied", while another holds it. Lock files get the
// directory's group and a mode for exactly the users who may write the
// directory, whatever the umask.
func TestSharedDirectory(t *testing.T) {
	requireRoot(t)
	old := unix.Umask(0o077) // the children inherit it; lock files must not
	defer unix.Umask(old)
	tests := []struct {
		name     string
		mode     os.FileMode
		gid      int
		wantMode os.FileMode
	}{
		{"1777", os.ModeSticky | 0o777, 0, 0o666},
		{"2775", os.ModeSetgid | 0o775, jobs, 0o660},
		{"0775 group without setgid", 0o775, jobs, 0o660},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := mkStore(t, tc.mode, 0, tc.gid)
			var last uint64
			for i, u := range []runAs{nobody, other, root, nobody} {
				tok := token(t, u.String(), as(t, u, "acquire", dir, "job"))
				if tok <= last {
					t.Fatalf("acquisition %d as %v: token %d <= previous %d", i, u, tok, last)
				}
				last = tok
			}
			fi, err := os.Stat(filepath.Join(dir, "job.lock"))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != tc.wantMode || tc.wantMode == 0o660 && int(st.Gid) != tc.gid {
				t.Fatalf("lock file mode %v group %d; want %v group %d", fi.Mode().Perm(), st.Gid, tc.wantMode, tc.gid)
			}
			// While one user holds it, the others hear who holds it.
			h := holdAs(t, other, dir, "job")
			token(t, "holder", h.line)
			for _, u := range []runAs{nobody, root} {
				if got := as(t, u, "acquire", dir, "job"); !strings.HasPrefix(got, "err held") {
					t.Fatalf("acquire as %v while uid %d holds: %q; want held", u, other.uid, got)
				}
				if got := as(t, u, "status", dir, "job"); !strings.HasPrefix(got, "held uid54321 ") {
					t.Fatalf("status as %v: %q; want held by uid54321", u, got)
				}
			}
			h.stop(t)
		})
	}
}

// root using a user's private directory leaves lock files the user can
// still use.
func TestRootInPrivateDirectory(t *testing.T) {
	requireRoot(t)
	dir := mkStore(t, 0o700, int(other.uid), int(other.gid))
	tok := token(t, "root", as(t, root, "acquire", dir, "job"))
	fi, err := os.Stat(filepath.Join(dir, "job.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != other.uid || fi.Mode().Perm() != 0o600 {
		t.Fatalf("root's lock file: uid %d mode %v; want the directory owner's (%d), 0600", st.Uid, fi.Mode().Perm(), other.uid)
	}
	if tok2 := token(t, "owner", as(t, other, "acquire", dir, "job")); tok2 <= tok {
		t.Fatalf("owner's token %d <= root's %d", tok2, tok)
	}
}

// A hostile shared directory: whatever another user planted under a lock
// file's name, root and unprivileged users alike get a configuration error
// at once (no hang, no link followed, nothing written through it).
func TestHostileLockFiles(t *testing.T) {
	requireRoot(t)
	outside := traversable(t)
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(outside, "absent")
	plants := []struct {
		name  string
		plant func(t *testing.T, path string)
		says  string
	}{
		{"symlink to an absent file", func(t *testing.T, p string) { must(t, os.Symlink(absent, p)) }, "symbolic link"},
		{"symlink to an empty file", func(t *testing.T, p string) { must(t, os.Symlink(victim, p)) }, "symbolic link"},
		{"FIFO", func(t *testing.T, p string) { must(t, unix.Mkfifo(p, 0o666)) }, "FIFO"},
		{"directory", func(t *testing.T, p string) { must(t, os.Mkdir(p, 0o777)) }, "directory"},
		{"socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			must(t, err)
			t.Cleanup(func() { l.Close() })
		}, "socket"},
	}
	for _, pl := range plants {
		for _, u := range []runAs{root, nobody} {
			t.Run(pl.name+"/"+u.String(), func(t *testing.T) {
				dir := mkStore(t, os.ModeSticky|0o777, 0, 0)
				pl.plant(t, filepath.Join(dir, "job.lock"))
				for _, op := range []string{"acquire", "status"} {
					got := as(t, u, op, dir, "job")
					if !strings.HasPrefix(got, "err config ") || !strings.Contains(got, pl.says) || strings.Contains(got, "lease:") {
						t.Errorf("%s: %q; want one configuration error saying %q, without package prefixes", op, got, pl.says)
					}
				}
				if _, err := os.Lstat(absent); err == nil {
					t.Errorf("the symlink's target %s was created", absent)
				}
				if b, err := os.ReadFile(victim); err != nil || len(b) != 0 {
					t.Errorf("the symlink's target was written: %q, %v", b, err)
				}
			})
		}
	}
}

// A lock file writable by users who could not write it through the
// directory is refused; so is a world-writable directory without the
// sticky bit.
func TestPermissionsBeyondTheDirectory(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name     string
		dirMode  os.FileMode
		dirGid   int
		fileMode os.FileMode
		fileGid  int
	}{
		{"world-writable file in a private directory", 0o755, 0, 0o666, 0},
		{"group-writable file in a private directory", 0o755, jobs, 0o660, jobs},
		{"world-writable file in a group directory", os.ModeSetgid | 0o775, jobs, 0o666, jobs},
		{"file writable by another group", os.ModeSetgid | 0o775, jobs, 0o660, 54398},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := mkStore(t, tc.dirMode, 0, tc.dirGid)
			p := filepath.Join(dir, "job.lock")
			must(t, os.WriteFile(p, nil, 0o600))
			must(t, os.Chown(p, 0, tc.fileGid))
			must(t, os.Chmod(p, tc.fileMode))
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.TryAcquire(context.Background(), lease.Request{Name: "job", ID: lease.NewID()})
			if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "writable by users who cannot write the directory") {
				t.Fatalf("TryAcquire: %v; want a configuration error about the file's permissions", err)
			}
			if _, err := s.Status(context.Background(), "job"); !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("Status: %v; want a configuration error", err)
			}
			// An unprivileged user (in the group) is refused too: the same
			// way when the file's mode lets them open it, by the kernel
			// (permission denied, a configuration error) when it does not.
			for _, op := range []string{"acquire", "status"} {
				got := as(t, other, op, dir, "job")
				if !strings.HasPrefix(got, "err config ") || tc.fileMode&0o002 != 0 && !strings.Contains(got, "writable by users who cannot write the directory") {
					t.Fatalf("%s as %v: %q; want a configuration error", op, other, got)
				}
			}
		})
	}
	t.Run("world-writable directory without the sticky bit", func(t *testing.T) {
		dir := mkStore(t, 0o777, 0, 0)
		if _, err := Open(dir); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "sticky") {
			t.Fatalf("Open: %v; want a configuration error asking for the sticky bit", err)
		}
	})
}

// A lock file an older leaderrun made 0644 in a group directory is given the
// directory's mode by its owner, so the rest of the group can use it.
func TestOldLockFileRepaired(t *testing.T) {
	requireRoot(t)
	dir := mkStore(t, os.ModeSetgid|0o775, 0, jobs)
	p := filepath.Join(dir, "job.lock")
	must(t, os.WriteFile(p, []byte(`{"name":"job","token":7,"held":false}`+"\n"), 0o644))
	must(t, os.Chown(p, int(nobody.uid), 65534))
	must(t, os.Chmod(p, 0o644))
	if got := as(t, other, "acquire", dir, "job"); !strings.HasPrefix(got, "err config ") {
		t.Fatalf("before repair, uid %d: %q; want permission denied (config)", other.uid, got)
	}
	token(t, "owner", as(t, nobody, "acquire", dir, "job"))
	token(t, "group member", as(t, other, "acquire", dir, "job"))
}

// A uid without a password entry has no default directory: $HOME is not
// trusted (two shells with different HOME would get two leaders).
func TestDefaultDirWithoutPasswdEntry(t *testing.T) {
	requireRoot(t)
	got := as(t, other, "defaultdir", "", "")
	if !strings.HasPrefix(got, "err config no home directory for uid 54321") || !strings.Contains(got, "--store") {
		t.Fatalf("DefaultDir as uid %d: %q; want a configuration error asking for --store", other.uid, got)
	}
	if got := as(t, nobody, "defaultdir", "", ""); !strings.HasPrefix(got, "ok /") {
		t.Logf("nobody has no passwd entry here either: %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var _ = time.Second

// A world-writable directory (1777) is refused by default, at Open when it
// exists and at first use when it became one later, in one line that names
// the fixes; Options.World accepts it. A group directory (2775, or 0775)
// and a private one are accepted. (Every user could stop, block or take
// over the jobs of a 1777 directory, which was accepted silently.)
func TestWorldWritableRefused(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o700, true}, {0o755, true}, {0o775, true}, {0o775 | os.ModeSetgid, true}, {0o777 | os.ModeSticky, false}, {0o777 | os.ModeSticky | os.ModeSetgid, false}} {
		dir := filepath.Join(base, fmt.Sprintf("%o", uint32(tc.mode)))
		must(t, os.Mkdir(dir, 0o700))
		must(t, os.Chmod(dir, tc.mode))
		s, err := Open(dir)
		if tc.ok {
			if err != nil {
				t.Errorf("Open(%v): %v", tc.mode, err)
				continue
			}
			l, err := s.TryAcquire(context.Background(), lease.Request{Name: "j", Label: "h", ID: lease.NewID()})
			if err != nil {
				t.Errorf("TryAcquire in %v: %v", tc.mode, err)
			} else {
				_ = l.Release(context.Background())
			}
			s.Close()
			continue
		}
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "can be written by every user") ||
			!strings.Contains(err.Error(), "2775") || !strings.Contains(err.Error(), "?shared=world") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%v) = %v; want one line refusing it and naming the fixes", tc.mode, err)
		}
		w, err := OpenWith(dir, Options{World: true})
		if err != nil {
			t.Fatalf("OpenWith(%v, World): %v", tc.mode, err)
		}
		l, err := w.TryAcquire(context.Background(), lease.Request{Name: "j", Label: "h", ID: lease.NewID()})
		if err != nil {
			t.Fatalf("TryAcquire in %v with World: %v", tc.mode, err)
		}
		_ = l.Release(context.Background())
		w.Close()
	}
	// A private directory made world-writable after Open: refused at use.
	dir := filepath.Join(base, "later")
	s := openT(t, dir)
	if l, err := s.TryAcquire(context.Background(), lease.Request{Name: "j", Label: "h", ID: lease.NewID()}); err != nil {
		t.Fatal(err)
	} else {
		_ = l.Release(context.Background())
	}
	must(t, os.Chmod(dir, 0o777|os.ModeSticky))
	for op, err := range map[string]error{
		"TryAcquire": func() error {
			_, err := s.TryAcquire(context.Background(), lease.Request{Name: "j", Label: "h", ID: lease.NewID()})
			return err
		}(),
		"Status": func() error { _, err := s.Status(context.Background(), "j"); return err }(),
		"Runs":   func() error { _, err := s.Runs(context.Background(), "j", 1); return err }(),
	} {
		if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "can be written by every user") {
			t.Errorf("%s once the directory is 1777: %v; want refused", op, err)
		}
	}
}
