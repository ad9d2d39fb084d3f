package kubelease

import (
	"log/slog"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// client-go logs through klog, which writes to stderr by default, and hands
// the API server's warnings to a handler that does too; stderr is
// leaderrun's one-line-per-event log. The first Open routes klog's output
// (process wide) to its logger at debug level, and every store sends the
// server's warnings there too.

var libraryLog sync.Once

// routeLibraryLog sends klog's lines (at its own verbosity, 0: errors and
// warnings) to log at debug level, once per process.
func routeLibraryLog(log *slog.Logger) {
	libraryLog.Do(func() {
		klog.LogToStderr(false)
		klog.SetOutput(klogWriter{log})
	})
}

// klogWriter is klog's output: one debug line per write.
type klogWriter struct{ log *slog.Logger }

// Write logs p as one line.
func (w klogWriter) Write(p []byte) (int, error) {
	w.log.Debug("client-go", "line", strings.TrimSpace(string(p)))
	return len(p), nil
}

// warnings hands the API server's warnings to the store's debug log.
type warnings struct{ log *slog.Logger }

// HandleWarningHeader logs one warning.
func (w warnings) HandleWarningHeader(code int, agent, text string) {
	w.log.Debug("API server warning", "code", code, "agent", agent, "text", text)
}
