// Package stderrlog is leaderrun's log on stderr: one human line per event
// ("leaderrun: ..."), or JSON lines, written so that a lost line never ends
// the run and a line never starts in the middle of the child's.
package stderrlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"
)

// New builds leaderrun's stderr logger: JSON lines with --log-format
// json, otherwise one human line per event ("leaderrun: ..."), coloured only
// when w is a terminal and NO_COLOR is unset.
//
// A line that cannot be written (a closed pipe, a full disk) is dropped and
// counted, never an error: logging must not end leaderrun while it holds a
// lease. The next line that does get through carries log_lines_dropped=N.
func New(w io.Writer, format string, level slog.Level, getenv func(string) string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	dw := &dropWriter{w: w}
	if f, ok := w.(*os.File); ok {
		if fw := newFileLineWriter(f); fw != nil {
			dw.w = fw
		}
	}
	switch format {
	case "json":
		return slog.New(&dropCounter{Handler: slog.NewJSONHandler(dw, opts), w: dw}), nil
	case "text", "":
		colour, tty := false, -1
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			tty = int(f.Fd())
			colour = getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
		}
		return slog.New(&dropCounter{Handler: &textHandler{w: dw, level: level, colour: colour, tty: tty, mu: &sync.Mutex{}}, w: dw}), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// ValidFormat reports whether New takes format: text (or "") or json.
func ValidFormat(format string) bool {
	return format == "text" || format == "" || format == "json"
}

// textHandler writes "leaderrun: message key=value ..." lines.
type textHandler struct {
	w      io.Writer
	level  slog.Level
	colour bool
	tty    int // the terminal's descriptor when w is one, else -1
	mu     *sync.Mutex
	attrs  []slog.Attr
}

func (h *textHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &h2
}

func (h *textHandler) WithGroup(string) slog.Handler { return h }

func (h *textHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(FreshLine(h.tty))
	prefix := "leaderrun:"
	if h.colour {
		c := color.New(color.FgCyan)
		switch {
		case r.Level >= slog.LevelError:
			c = color.New(color.FgRed, color.Bold)
		case r.Level >= slog.LevelWarn:
			c = color.New(color.FgYellow)
		}
		c.EnableColor()
		prefix = c.Sprint(prefix)
	}
	b.WriteString(prefix)
	b.WriteByte(' ')
	b.WriteString(r.Message)
	// The final line (the record with exit_code) has one shape: what
	// happened, then "; exit N". Its event and lease are for JSON readers;
	// the message already names the lease.
	final, code := false, int64(0)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "exit_code" && a.Value.Kind() == slog.KindInt64 {
			final, code = true, a.Value.Int64()
		}
		return true
	})
	write := func(a slog.Attr) bool {
		if a.Key == "event" || a.Equal(slog.Attr{}) || final && (a.Key == "exit_code" || a.Key == "lease") {
			return true
		}
		v := a.Value.Resolve()
		s := v.String()
		if v.Kind() == slog.KindDuration {
			s = v.Duration().Round(time.Millisecond).String()
		}
		if strings.ContainsAny(s, " \t\"=") {
			s = fmt.Sprintf("%q", s)
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, s)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	if final {
		fmt.Fprintf(&b, "; exit %d", code)
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// dropWriter passes writes to w and swallows their errors, counting the
// writes that failed.
type dropWriter struct {
	w       io.Writer
	dropped atomic.Int64
}

func (d *dropWriter) Write(p []byte) (int, error) {
	if _, err := d.w.Write(p); err != nil {
		d.dropped.Add(1)
	}
	return len(p), nil
}

// dropCounter adds log_lines_dropped to each record once lines were lost.
type dropCounter struct {
	slog.Handler
	w *dropWriter
}

func (h *dropCounter) Handle(ctx context.Context, r slog.Record) error {
	r = signalNames(r)
	if n := h.w.dropped.Load(); n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64("log_lines_dropped", n))
	}
	return h.Handler.Handle(ctx, r)
}

// signalNames returns r with every signal attribute named as leaderrun's
// messages name signals ("SIGTERM", not Go's "terminated" or "user defined
// signal 1", nor a bare number in JSON), and signal 0 ("none") left out.
func signalNames(r slog.Record) slog.Record {
	has := false
	r.Attrs(func(a slog.Attr) bool {
		_, has = signalOf(a.Value)
		return !has
	})
	if !has {
		return r
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if sig, ok := signalOf(a.Value); ok {
			if sig == 0 {
				return true
			}
			a.Value = slog.StringValue(signalName(sig))
		}
		out.AddAttrs(a)
		return true
	})
	return out
}

// signalOf returns the signal v holds, if it holds one.
func signalOf(v slog.Value) (syscall.Signal, bool) {
	if v.Kind() != slog.KindAny {
		return 0, false
	}
	sig, ok := v.Any().(syscall.Signal)
	return sig, ok
}

// signalName is sig as leaderrun names signals everywhere: SIGTERM,
// SIGUSR1, or "signal N" for one without a name.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}

func (h *dropCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &dropCounter{Handler: h.Handler.WithAttrs(as), w: h.w}
}

func (h *dropCounter) WithGroup(name string) slog.Handler {
	return &dropCounter{Handler: h.Handler.WithGroup(name), w: h.w}
}

// FreshLine returns what moves a terminal's cursor to the start of a fresh
// line only when it is not already at one: as many spaces as the terminal is
// wide, then a carriage return (zsh's PROMPT_SP does the same). From column
// 0 the spaces end in the last column, and the return goes back to the start
// of the same, still empty, line; from any other column (a child's output
// without a final newline, an echoed ^C) they wrap to the next line first.
// Nothing when fd is not a terminal (-1) or its width is unknown: files and
// pipes get clean lines.
func FreshLine(fd int) string {
	if fd < 0 {
		return ""
	}
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return ""
	}
	return strings.Repeat(" ", int(ws.Col)) + "\r"
}

// fileLineWriter starts each of leaderrun's lines on a fresh line in a
// regular file (stderr redirected to a log file, `>job.log 2>&1`): the
// child writes to the same file, directly, and its output may end without a
// newline ("no newlineleaderrun: …"). Before each line it reads the byte
// before where the line will land (the file's end with O_APPEND, else the
// descriptor's offset, which `2>&1` shares with stdout) and writes a
// newline first when that byte is not one. Whatever wrote that byte, the
// child's stdout or stderr, is seen: the check is on the file itself.
//
// Pipes and sockets (cron mail, CI logs, journald) keep what was written
// only in their reader, so there leaderrun cannot know and writes its line
// as is (docs/usage.md says so); a terminal is handled by FreshLine.
type fileLineWriter struct {
	f      *os.File
	append bool
	mu     sync.Mutex
	rd     *os.File // the file opened again for reading when f is write-only; nil until needed, then open for the logger's life
	rdErr  bool     // it could not be opened: write lines as they are
}

// newFileLineWriter returns a fileLineWriter for f, or nil when f is not a
// regular file.
func newFileLineWriter(f *os.File) *fileLineWriter {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return nil
	}
	return &fileLineWriter{f: f, append: fl&unix.O_APPEND != 0}
}

func (w *fileLineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.needsNewline() {
		// One write, as the line itself: the child may be writing too.
		if _, err := w.f.Write(append([]byte{'\n'}, p...)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return w.f.Write(p)
}

// needsNewline reports whether the byte before the next write's position
// is there and is not a newline.
func (w *fileLineWriter) needsNewline() bool {
	fd := int(w.f.Fd())
	var pos int64
	if w.append {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			return false
		}
		pos = st.Size
	} else {
		var err error
		if pos, err = unix.Seek(fd, 0, io.SeekCurrent); err != nil {
			return false
		}
	}
	if pos <= 0 {
		return false
	}
	b := []byte{0}
	if _, err := unix.Pread(fd, b, pos-1); err == nil {
		return b[0] != '\n'
	} else if err != unix.EBADF {
		return false
	}
	// Opened write-only (`>file`): read it through /proc, once opened.
	if w.rd == nil && !w.rdErr {
		rd, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			w.rdErr = true
			return false
		}
		w.rd = rd
	}
	if w.rd == nil {
		return false
	}
	if _, err := w.rd.ReadAt(b, pos-1); err != nil {
		return false
	}
	return b[0] != '\n'
}
