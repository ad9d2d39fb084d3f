package etcdlease

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog returns a zap logger (what the etcd client logs to) that sends
// its error entries to l at debug level, with secrets masked: stderr is leaderrun's
// one-line-per-event log, and the client's warnings (a member unreachable, a
// retry) are the store's business, reported through its errors.
func zapToSlog(l *slog.Logger, secrets []string) *zap.Logger {
	return zap.New(slogCore{l: l, secrets: secrets})
}

type slogCore struct {
	l       *slog.Logger
	secrets []string
	fields  []zapcore.Field
}

// Enabled drops the client's debug, info and warning entries (one per call
// attempt or retry): they repeat what the store's own errors say, and would
// drown leaderrun's -v output.
func (c slogCore) Enabled(lvl zapcore.Level) bool {
	return lvl >= zapcore.ErrorLevel && c.l.Enabled(context.Background(), slog.LevelDebug)
}

func (c slogCore) With(fs []zapcore.Field) zapcore.Core {
	c.fields = append(slices.Clip(c.fields), fs...)
	return c
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	args := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		args = append(args, k, storeerr.Quote(fmt.Sprint(v), c.secrets, 1))
	}
	c.l.Debug("etcd client: "+storeerr.Quote(e.Message, c.secrets, 1), args...)
	return nil
}

func (slogCore) Sync() error { return nil }

// slogWriter takes gRPC's log lines (grpclog writes whole lines) to slog at
// debug level.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("grpc: " + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
