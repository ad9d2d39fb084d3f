package filelease

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// A store directory may be private (only its owner writes it: lock files are
// made 0600), shared with a group (group-writable, typically 2775 with the
// setgid bit: lock files are made 0660 and given the directory's group), or,
// only with Options.World, shared with everyone (world-writable and sticky,
// like /run/lock: lock files are made 0666). Users who cannot write the directory get no access to the
// lock files either: read access alone would let them hold a shared flock and
// block the lease.
//
// A shared directory is hostile ground: anyone who can write it can plant a
// symbolic link, a FIFO or a directory under a lock file's name. Lock files
// are therefore opened with O_NOFOLLOW|O_NONBLOCK (a link is never followed,
// even by root; a FIFO never blocks the open) and anything but a regular file
// is refused. A lock file writable by users who could not write it through
// the directory's own permissions (say 0666 in a private directory) is
// refused too, as is a world-writable directory without the sticky bit
// (anyone could replace anyone's lock file).

// dirInfo is what the store directory's permissions say about who may use it.
type dirInfo struct {
	uid, gid uint32
	mode     uint32 // permission bits with setgid and sticky
}

func (d dirInfo) group() bool { return d.mode&0o020 != 0 }
func (d dirInfo) world() bool { return d.mode&0o002 != 0 }

// fileMode is the mode of a lock file in the directory: read and write for
// whoever may write the directory, nothing for anyone else.
func (d dirInfo) fileMode() uint32 {
	switch {
	case d.world():
		return 0o666
	case d.group():
		return 0o660
	}
	return 0o600
}

// statDir reads the store directory's permissions and refuses a directory
// that is not one, or that anyone may write without the sticky bit. It
// returns an error wrapping os.ErrNotExist (and nothing else) when it is
// missing.
func statDir(dir string) (dirInfo, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return dirInfo{}, os.ErrNotExist
		}
		return dirInfo{}, classified(err, "cannot read the file store directory "+dir)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return dirInfo{}, newError(lease.ErrConfig, nil, fmt.Sprintf("the file store %s is not a directory", dir))
	}
	d := dirInfo{uid: st.Uid, gid: st.Gid, mode: st.Mode & 0o7777}
	if d.world() && d.mode&unix.S_ISVTX == 0 {
		return dirInfo{}, newError(lease.ErrConfig, nil, fmt.Sprintf(
			"the file store directory %s is writable by everyone without the sticky bit, so anyone could replace a lock file; run chmod +t %s, or use a directory shared with a group (mode 2775)", dir, dir))
	}
	return d, nil
}

// worldError refuses the world-writable directory dir, naming the fixes.
func worldError(dir string, d dirInfo) error {
	return newError(lease.ErrConfig, nil, fmt.Sprintf(
		"the file store directory %s (mode %04o) can be written by every user, any of whom could stop, block or take over its jobs; "+
			"use a directory shared with a group (install -d -m 2775 -g GROUP DIR), or the per-user default (no --store), "+
			"or accept the risk with file://%s?shared=world (see docs/stores.md, section File)", dir, d.mode, dir))
}

// makeDir creates the missing directories of dir with mode 0700: a directory
// leaderrun creates is private to the user. A directory shared between users
// is created beforehand by an administrator (see docs/stores.md).
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return classified(err, "cannot create the file store directory "+dir)
	}
	return nil
}

// fileKind names a file type for a message.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "not a regular file"
}

// openFlags are used for every open of a lock file: never follow a link,
// never block on a FIFO, never leak into the child.
const openFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// openLock opens the lock file at path with flag (O_RDONLY or O_RDWR) and
// checks it is a regular file whose permissions the directory vouches for.
// With create, a missing file is created (O_EXCL, so an existing one is never
// opened with O_CREAT) with the directory's lock file mode and group. A
// missing file without create returns an error wrapping os.ErrNotExist.
func openLock(path string, flag int, d dirInfo, create bool) (*os.File, error) {
	for range 5 {
		fd, err := unix.Open(path, flag|openFlags, 0)
		if errors.Is(err, unix.ENOENT) && create {
			fd, err = unix.Open(path, flag|unix.O_CREAT|unix.O_EXCL|openFlags, 0o600)
			if errors.Is(err, unix.EEXIST) {
				continue // someone else created it first: open theirs
			}
			if err == nil {
				if err := adopt(fd, d); err != nil {
					_ = unix.Close(fd)
					return nil, classified(err, "cannot set the permissions of lock file "+path)
				}
			}
		}
		if err != nil {
			return nil, openError(path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		if err := checkLock(f, d, create); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, newError(lease.ErrUnavailable, nil, "lock file "+path+" keeps appearing and disappearing")
}

// adopt gives a lock file this process just created the mode and owner the
// directory calls for, whatever the umask: group-shared directories get
// their group (as the setgid bit would), and a file root creates in a
// private directory goes to the directory's owner, so the owner can still
// use it.
func adopt(fd int, d dirInfo) error {
	uid, gid := -1, -1
	switch {
	case d.group() && !d.world():
		gid = int(d.gid)
	case !d.group() && !d.world() && unix.Geteuid() == 0:
		uid, gid = int(d.uid), int(d.gid)
	}
	if uid != -1 || gid != -1 {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
	}
	return unix.Fchmod(fd, d.fileMode())
}

// openError turns an open error into a sentence with its class.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return newError(lease.ErrConfig, nil, fmt.Sprintf("lock file %s is a symbolic link; leaderrun never follows links in the store directory: remove it", path))
	case errors.Is(err, unix.EISDIR):
		return newError(lease.ErrConfig, nil, fmt.Sprintf("lock file %s is a directory, not a regular file: remove it", path))
	case errors.Is(err, unix.ENXIO):
		return newError(lease.ErrConfig, nil, fmt.Sprintf("lock file %s is a FIFO or socket, not a regular file: remove it", path))
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return &storeError{kind: lease.ErrConfig, cause: err, msg: "cannot open lock file " + path, hint: fmt.Sprintf(
			"leaderrun runs as uid %d; a directory shared by several users must be made group-writable (2775) beforehand (see docs/stores.md, section File, \"A directory shared by several users\")", os.Geteuid())}
	}
	return classified(err, "cannot open lock file "+path)
}

// checkLock refuses anything but a regular file, and a lock file writable by
// users who could not write it through the directory: group-writable for
// another group or in a directory the group cannot write, world-writable in
// a directory not everyone can write. With repair, a lock file this user
// owns whose mode or group is not what the directory calls for (made by an
// older leaderrun, or by hand) is corrected.
func checkLock(f *os.File, d dirInfo, repair bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return classified(err, "cannot read lock file "+f.Name())
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return newError(lease.ErrConfig, nil, fmt.Sprintf("lock file %s is %s, not a regular file: remove it", f.Name(), fileKind(st.Mode)))
	}
	extra := st.Mode&0o002 != 0 && !d.world() ||
		st.Mode&0o020 != 0 && !d.world() && (!d.group() || st.Gid != d.gid)
	if extra {
		return newError(lease.ErrConfig, nil, fmt.Sprintf(
			"lock file %s (mode %04o, group %d) is writable by users who cannot write the directory %s (mode %04o, group %d); run chmod %04o on it, or remove it",
			f.Name(), st.Mode&0o7777, st.Gid, filepath.Dir(f.Name()), d.mode, d.gid, d.fileMode()))
	}
	if repair && st.Uid == uint32(os.Geteuid()) && (st.Mode&0o7777 != d.fileMode() || d.group() && !d.world() && st.Gid != d.gid) {
		// Best effort: a file we cannot fix still works for us.
		_ = adopt(int(f.Fd()), d)
	}
	return nil
}
