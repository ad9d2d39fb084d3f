package run

import (
	"cmp"
	"io"
	"os"
	"syscall"

	"github.com/mattn/go-isatty"

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

// --ping-output-tail: the last bytes of the child's output in a failure's
// ping. Only with the flag does anything stand between the child and its
// output: each stream that is not a terminal becomes a pipe, which
// leaderrun-ping reads, copying each chunk on to where the stream went and
// keeping the last bytes (cmd/leaderrun-ping/tail.go). leaderrun-ping,
// not leaderrun, copies: a leaderrun stopped or frozen (SIGSTOP, a
// debugger) would otherwise leave the child blocked on a full pipe; and a
// terminal is left to the child, which a pipe would turn into a program
// without colour, line editing or job control (a person watching a
// terminal has no need of a tail).

// captureOutput returns the stdout and stderr the child gets for the
// streams stdout and stderr, with leaderrun-ping started to read them,
// and done, which closes leaderrun's copies of the pipes' write ends once
// the child has them (the copy ends when the child's do). Without
// --ping-output-tail, or when neither stream can be read (terminals, no
// pipe, no leaderrun-ping), the child gets the streams as they are, and
// done does nothing.
func (m *monitor) captureOutput(stdout, stderr *os.File) (childOut, childErr *os.File, done func()) {
	childOut, childErr, done = stdout, stderr, func() {}
	if m.cfg.Ping == nil || m.cfg.OutputTail == 0 {
		return
	}
	stdout, stderr = cmp.Or(stdout, os.Stdout), cmp.Or(stderr, os.Stderr) // the runner's defaults
	tail := pingwire.Tail{Bytes: m.cfg.OutputTail}
	var extra, ours, theirs []*os.File // leaderrun-ping's pairs; the read and write ends
	pipe := func(name string, dst *os.File) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			return nil
		}
		tail.Streams = append(tail.Streams, name)
		extra, ours, theirs = append(extra, r, dst), append(ours, r), append(theirs, w)
		return w
	}
	outTTY, errTTY := isatty.IsTerminal(stdout.Fd()), isatty.IsTerminal(stderr.Fd())
	if !outTTY && !errTTY && sameFile(stdout, stderr) {
		if w := pipe("out+err", stdout); w != nil { // one pipe keeps their order
			childOut, childErr = w, w
		}
	} else {
		if !outTTY {
			if w := pipe("out", stdout); w != nil {
				childOut = w
			}
		}
		if !errTTY {
			if w := pipe("err", stderr); w != nil {
				childErr = w
			}
		}
	}
	p, ok := startTailPinger(m.cfg.PingProgram, m.cfg.Ping, m.cfg.PingFormat, tail, extra, m.log)
	m.ping = p
	closeAll(ours)
	if !ok { // wait says why; the output goes where it would
		closeAll(theirs)
		return stdout, stderr, func() {}
	}
	return childOut, childErr, func() { closeAll(theirs) }
}

// sameFile reports whether a and b write to one place: one file, socket,
// pipe or device, and for a regular file at one offset (one open file,
// as 2>&1 makes, rather than two that would write over each other; two
// opened apart that happen to share an offset are taken for one, and
// their writes then follow each other rather than overwrite).
func sameFile(a, b *os.File) bool {
	var sa, sb syscall.Stat_t
	if syscall.Fstat(int(a.Fd()), &sa) != nil || syscall.Fstat(int(b.Fd()), &sb) != nil || sa.Dev != sb.Dev || sa.Ino != sb.Ino {
		return false
	}
	if sa.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return true
	}
	oa, erra := a.Seek(0, io.SeekCurrent)
	ob, errb := b.Seek(0, io.SeekCurrent)
	return erra == nil && errb == nil && oa == ob
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
