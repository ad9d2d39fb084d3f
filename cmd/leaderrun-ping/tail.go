package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

// With --ping-output-tail, this program stands between the child and
// where its output goes: leaderrun gives the child the write end of a pipe
// per stream, and this program the read end and the original descriptor
// (pingwire.Tail). It copies each chunk on as soon as it is read, in one
// write (so what the child wrote at once stays together; with one pipe for
// both streams, their order is the child's), and keeps the last bytes in
// a ring of fixed size. It runs in a process of its own, not in leaderrun,
// so that a leaderrun that is stopped or frozen never leaves the child
// blocked on a full pipe: the copy goes on for as long as the child's
// output is open, after the report too, and after leaderrun's death.

// streamFile is the descriptor i of the streams' (from 3 on); tests
// replace it.
var streamFile = func(i int) *os.File { return os.NewFile(uintptr(3+i), "stream"+strconv.Itoa(i)) }

// tailer copies the child's output on and keeps its tail.
type tailer struct {
	size    int
	streams []string
	wg      sync.WaitGroup
	done    chan struct{} // closed when every copy has ended

	mu    sync.Mutex
	ring  []byte // the last len(ring) bytes, oldest at pos once full
	pos   int
	full  bool
	total int64
}

// startTail starts the copies t names; nil without a tail.
func startTail(t pingwire.Tail) *tailer {
	if t.Bytes == 0 {
		return nil
	}
	tl := &tailer{size: t.Bytes, streams: t.Streams, done: make(chan struct{}), ring: make([]byte, t.Bytes)}
	for i := range t.Streams {
		tl.wg.Add(1)
		go tl.copy(streamFile(2*i), streamFile(2*i+1))
	}
	go func() { tl.wg.Wait(); close(tl.done) }() // ends with the copies
	return tl
}

// copy copies src (the pipe the child writes to) to dst until the pipe's
// end, keeping the tail. A dst whose reader is gone (EPIPE: `leaderrun …
// | head`) ends the copy, and closing src gives the child the same EPIPE
// (or SIGPIPE) on its next write; any other error of dst (a full disk)
// loses the chunk, as the child's own write would have failed.
func (t *tailer) copy(src, dst *os.File) {
	defer t.wg.Done()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); errors.Is(werr, syscall.EPIPE) {
				return
			}
			t.keep(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// keep adds b to the ring.
func (t *tailer) keep(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(b))
	if len(b) >= t.size {
		copy(t.ring, b[len(b)-t.size:])
		t.pos, t.full = 0, true
		return
	}
	n := copy(t.ring[t.pos:], b)
	if n < len(b) {
		copy(t.ring, b[n:])
		t.full = true
	}
	t.pos = (t.pos + len(b)) % t.size
	if t.pos == 0 {
		t.full = true
	}
}

// snapshot waits up to wait for the copies to end (the child's tree is
// gone when the end's ping comes, so its output is at its end but for the
// last chunk in flight) and returns the tail, oldest byte first, and how
// many bytes the output had in all.
func (t *tailer) snapshot(wait time.Duration) ([]byte, int64) {
	t.settle(wait)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return append([]byte(nil), t.ring[:t.pos]...), t.total
	}
	return append(append([]byte(nil), t.ring[t.pos:]...), t.ring[:t.pos]...), t.total
}

// settle waits up to d for the copies to end; it is safe on a nil tailer.
func (t *tailer) settle(d time.Duration) {
	if t == nil {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.done:
	case <-timer.C:
	}
}

// wait waits for the copies to end: for as long as the child's output is
// open, by the child or by what it left behind.
func (t *tailer) wait() {
	if t != nil {
		<-t.done
	}
}

// withTail is body followed by the tail, the whole at most limit bytes:
// the tail's oldest bytes go first, at a character's boundary, and a line
// before it says which streams it is of and how much of them it holds.
func (t *tailer) withTail(body string, limit int, wait time.Duration) string {
	tail, total := t.snapshot(wait)
	for i := 0; i < utf8.UTFMax-1 && int64(len(tail)) < total && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:] // the ring's cut split a character
	}
	s := strings.ToValidUTF8(string(tail), "\uFFFD")
	what := t.what()
	head := func(n int) string {
		if int64(n) == total {
			return fmt.Sprintf("--- the command's %s (%d bytes) ---", what, total)
		}
		return fmt.Sprintf("--- the last %d bytes of the command's %s (%d in all) ---", n, what, total)
	}
	if len(t.streams) == 0 {
		return clip(body+"\n--- the command's "+what+" ---", limit)
	}
	room := max(limit-len(body)-2-len(head(len(s))), 0)
	if len(s) > room {
		s = s[len(s)-room:]
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return clip(body+"\n"+head(len(s))+"\n"+s, limit)
}

// what names the streams the tail is of, and those left out (a terminal).
func (t *tailer) what() string {
	has := map[string]bool{}
	for _, s := range t.streams {
		has[s] = true
	}
	switch {
	case has["out+err"] || has["out"] && has["err"]:
		return "output (stdout and stderr)"
	case has["out"]:
		return "stdout (its stderr was a terminal, not captured)"
	case has["err"]:
		return "stderr (its stdout was a terminal, not captured)"
	}
	return "output went to a terminal: not captured"
}

// clip cuts s to at most limit bytes, at a character's boundary.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	s = s[:limit]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
