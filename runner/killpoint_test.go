package runner_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/runner"
)

// onMessage is a slog handler that closes ch when a record with msg is
// logged: the event tests wait for instead of sleeping.
type onMessage struct {
	msg string
	ch  chan struct{}
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case <-h.ch:
		default:
			close(h.ch)
		}
	}
	return nil
}
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onMessage) WithGroup(string) slog.Handler      { return h }

// Result says where SIGKILL came from: the grace timer,
// the kill point after a stop signal, or the kill point before any stop
// signal (both sent at once).
func TestKillOrigin(t *testing.T) {
	t.Parallel()
	t.Run("grace", func(t *testing.T) {
		t.Parallel()
		args, env := helperArgs(t, "ignoreterm")
		const grace = 50 * time.Millisecond
		c := startRun(t, runner.Config{Args: args, Env: env, Grace: grace})
		c.expectPID("ready ")
		c.cancel(errors.New("lease lost"))
		res, err := c.result()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Killed || res.KillPoint || res.KillAfter < grace {
			t.Fatalf("result %+v; want killed by the grace timer, KillAfter ≥ %v", res, grace)
		}
	})
	t.Run("kill point at once", func(t *testing.T) {
		t.Parallel()
		args, env := helperArgs(t, "ignoreterm")
		killNow := make(chan struct{})
		c := startRun(t, runner.Config{Args: args, Env: env, Grace: time.Hour, KillNow: killNow})
		c.expectPID("ready ")
		close(killNow) // no stop signal before it
		res, err := c.result()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Stopped || !res.Killed || !res.KillPoint || res.KillAfter != 0 {
			t.Fatalf("result %+v; want stopped and killed at once at the kill point", res)
		}
	})
	t.Run("kill point after the stop signal", func(t *testing.T) {
		t.Parallel()
		args, env := helperArgs(t, "ignoreterm")
		killNow := make(chan struct{})
		stopping := &onMessage{msg: "stopping child", ch: make(chan struct{})}
		c := startRun(t, runner.Config{Args: args, Env: env, Grace: time.Hour, KillNow: killNow, Log: slog.New(stopping)})
		c.expectPID("ready ")
		c.cancel(errors.New("lease lost"))
		<-stopping.ch // the stop signal has gone out
		close(killNow)
		res, err := c.result()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Killed || !res.KillPoint || res.KillAfter <= 0 || res.KillAfter >= time.Hour {
			t.Fatalf("result %+v; want killed at the kill point some time after the stop signal", res)
		}
	})
}
