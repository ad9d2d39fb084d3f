package runner

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// seqConn is one end of the guard's SOCK_SEQPACKET socket pair, on Go's
// poller: what net.UnixConn gives, without linking package net, whose cgo
// resolver makes the program dynamically linked, loading libc on every run
// (docs/performance.md, start-up cost).
type seqConn struct {
	f  *os.File
	rc syscall.RawConn
}

// newSeqConn takes ownership of fd.
func newSeqConn(fd int, name string) (*seqConn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name) // non-blocking: pollable
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &seqConn{f: f, rc: rc}, nil
}

// WriteMsg sends one message, with oob as its control data.
func (c *seqConn) WriteMsg(b, oob []byte) error {
	var err error
	if werr := c.rc.Write(func(fd uintptr) bool {
		err = unix.Sendmsg(int(fd), b, oob, nil, 0)
		return err != unix.EAGAIN
	}); werr != nil {
		return werr
	}
	return err
}

// ReadMsg receives one message; received descriptors are close-on-exec. A
// zero-length message without control data is the peer's close.
func (c *seqConn) ReadMsg(b, oob []byte) (n, oobn int, err error) {
	if rerr := c.rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, err = unix.Recvmsg(int(fd), b, oob, unix.MSG_CMSG_CLOEXEC)
		return err != unix.EAGAIN
	}); rerr != nil {
		return 0, 0, rerr
	}
	return n, oobn, err
}

// Close closes the socket; a blocked ReadMsg returns an error.
func (c *seqConn) Close() error { return c.f.Close() }
