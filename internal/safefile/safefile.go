// Package safefile reads the small files a user names (TLS roots, client
// certificates and keys, password and option files, the previous metrics
// file) without trusting what the name points at:
// a FIFO would block the open or the read forever, deaf to signals, and a
// device such as /dev/zero would be read without end.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxSize is the largest file Read accepts: far above any PEM bundle
// (the Mozilla root store is about 200 KiB), far below harm.
const MaxSize = 1 << 20

// ErrNotRegular is returned for a path that names anything but a regular
// file (a FIFO, a device, a directory, a socket).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooBig is returned for a file larger than MaxSize.
var ErrTooBig = fmt.Errorf("larger than %d bytes", MaxSize)

// Read returns the contents of the regular file at path. The open does not
// block (O_NONBLOCK: a FIFO without a writer would), anything but a regular
// file is refused with ErrNotRegular before a byte is read, and a file over
// MaxSize with ErrTooBig. Errors are *os.PathError values naming path.
func Read(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	if fi.Size() > MaxSize {
		return nil, &os.PathError{Op: "read", Path: path, Err: ErrTooBig}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSize { // it grew after the stat
		return nil, &os.PathError{Op: "read", Path: path, Err: ErrTooBig}
	}
	return b, nil
}

// Check reports whether Read would accept path, without keeping what it
// read: for files that a library opens by name itself (pgx reads
// sslrootcert=), checked first so that the library never meets a FIFO.
func Check(path string) error {
	_, err := Read(path)
	return err
}
