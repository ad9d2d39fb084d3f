package filelease

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// storeError is an error whose message is one sentence for the user ("cannot
// create lock file /x/job.lock: permission denied"), with no chain of
// package prefixes, that still classifies as its sentinel (errors.Is) and
// keeps its cause (errors.Is/As).
type storeError struct {
	kind  error // a lease sentinel: ErrConfig, ErrUnavailable, ErrLost, ErrNotHeld
	msg   string
	cause error
	hint  string // what to do, after the cause
}

func (e *storeError) Error() string {
	s := e.msg
	if e.cause != nil {
		s += ": " + plain(e.cause)
	}
	if e.hint != "" {
		s += "; " + e.hint
	}
	return s
}

func (e *storeError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

func newError(kind error, cause error, msg string) error {
	return &storeError{kind: kind, msg: msg, cause: cause}
}

// plain is the text of err without the operation and path that os errors
// repeat (the message already names the file): "permission denied".
func plain(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	return err.Error()
}

// transient reports whether a local file-system error may go away by itself
// (resources exhausted, I/O error, interrupted), so the operation is worth
// retrying. Everything else (permission, no such directory, not a directory,
// a symbolic link, a read-only or pseudo file system) is a configuration
// error that retrying cannot fix.
func transient(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case unix.EINTR, unix.EAGAIN, unix.ENOMEM, unix.EMFILE, unix.ENFILE, unix.EIO,
		unix.ENOSPC, unix.EDQUOT, unix.EBUSY, unix.ESTALE, unix.ENOLCK:
		return true
	}
	return false
}

// classified wraps a local file-system error as ErrUnavailable when it is
// transient and as ErrConfig otherwise.
func classified(err error, msg string) error {
	if transient(err) {
		return newError(lease.ErrUnavailable, err, msg)
	}
	return newError(lease.ErrConfig, err, msg)
}
