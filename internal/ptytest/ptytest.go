// Package ptytest drives programs through a real pseudo-terminal in tests:
// it opens a pty pair with /dev/ptmx, and a Term reads everything the
// programs write so that a test can await output instead of sleeping.
package ptytest

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Open opens a pseudo-terminal pair. It skips the test if the system has no
// ptys. The master is closed by the test's cleanup; the caller closes the
// slave once the programs that use it have started.
func Open(t testing.TB) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr != nil {
			return
		}
		n, ierr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
	}); err != nil || ierr != nil {
		t.Fatalf("unlock pty: %v %v", err, ierr)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// Modes returns the terminal settings of the pty whose master is m (on
// Linux, TCGETS on the master reads the slave's settings).
func Modes(t testing.TB, m *os.File) unix.Termios {
	t.Helper()
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st *unix.Termios
	var ierr error
	if err := rc.Control(func(fd uintptr) { st, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil || ierr != nil {
		t.Fatalf("TCGETS: %v %v", err, ierr)
	}
	return *st
}

// Term collects the output of a pty master. Expect consumes it in order.
type Term struct {
	t      testing.TB
	master *os.File
	mu     sync.Mutex
	buf    []byte
	pos    int           // Expect has consumed buf[:pos]
	more   chan struct{} // a token after each read
	done   chan struct{} // closed when the reader stops
	err    error         // why the reader stopped
}

// NewTerm starts reading master. The test's cleanup closes master and waits
// for the reader.
func NewTerm(t testing.TB, master *os.File) *Term {
	tm := &Term{t: t, master: master, more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			tm.mu.Lock()
			tm.buf = append(tm.buf, b[:n]...)
			if err != nil {
				tm.err = err // EIO once the last slave descriptor is closed
			}
			tm.mu.Unlock()
			select {
			case tm.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		master.Close() // unblocks the reader
		<-tm.done
	})
	return tm
}

// Send writes s to the terminal, as typed keys.
func (tm *Term) Send(s string) {
	tm.t.Helper()
	if _, err := tm.master.WriteString(s); err != nil {
		tm.t.Fatalf("write to the pty: %v", err)
	}
}

// Expect waits up to within for s to appear in the output after what earlier
// calls consumed, consumes the output up to the end of s and returns what
// came before it. It fails the test, showing the recent output, if s does not
// appear.
func (tm *Term) Expect(s string, within time.Duration) string {
	tm.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		tm.mu.Lock()
		i := bytes.Index(tm.buf[tm.pos:], []byte(s))
		if i >= 0 {
			before := string(tm.buf[tm.pos : tm.pos+i])
			tm.pos += i + len(s)
			tm.mu.Unlock()
			return before
		}
		rest, err := string(tm.buf[tm.pos:]), tm.err
		tm.mu.Unlock()
		select {
		case <-tm.more:
			continue
		case <-tm.done:
			if !tm.has(s) {
				tm.t.Fatalf("terminal closed (%v) before %q; output since last match:\n%s", err, s, rest)
			}
		case <-deadline.C:
			tm.t.Fatalf("timed out after %v waiting for %q; output since last match:\n%s", within, s, rest)
		}
	}
}

func (tm *Term) has(s string) bool {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return bytes.Contains(tm.buf[tm.pos:], []byte(s))
}

// Output returns everything read so far, for failure messages.
func (tm *Term) Output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return string(tm.buf)
}
