package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
)

// newLogger builds leaderrun's stderr logger: JSON lines with --log-format
// json, otherwise one human line per event ("leaderrun: ..."), coloured only
// when w is a terminal and NO_COLOR is unset.
func newLogger(w io.Writer, format string, level slog.Level, getenv func(string) string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		colour := false
		if f, ok := w.(*os.File); ok && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb" {
			colour = isatty.IsTerminal(f.Fd())
		}
		return slog.New(&textHandler{w: w, level: level, colour: colour, mu: &sync.Mutex{}}), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// textHandler writes "leaderrun: message key=value ..." lines.
type textHandler struct {
	w      io.Writer
	level  slog.Level
	colour bool
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
	write := func(a slog.Attr) bool {
		if a.Key == "event" || a.Equal(slog.Attr{}) {
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
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}
