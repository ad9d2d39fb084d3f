package run

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaderrun/leaderrun/runner"
)

// MinHealthInterval is the shortest --health-interval: a shell started more
// than ten times a second only loads the machine the leader runs on.
const MinHealthInterval = 100 * time.Millisecond

// healthCause is the cause of the run's end when the health check failed.
type healthCause struct{ err error }

func (h healthCause) Error() string { return h.err.Error() }
func (h healthCause) Unwrap() error { return h.err }

// healthGate starts the checks when the child has started and stops the run
// when they fail. A nil *healthGate does nothing.
type healthGate struct {
	cfg    HealthConfig
	env    []string
	log    *slog.Logger
	notify *notifier
	stop   context.CancelCauseFunc // ends the run: the runner's stop sequence
	cg     *runner.Cgroup          // the child's cgroup, if any: checks run inside it
	guard  *runner.Guard           // the run's guard: it kills a running check should leaderrun die
	h      *runner.Health          // set by start, on Run's goroutine
}

// start begins checking; the runner calls it once the child has started.
func (g *healthGate) start(ctx context.Context) {
	if g == nil {
		return
	}
	g.h = runner.StartHealth(ctx, runner.HealthConfig{
		Cmd: g.cfg.Cmd, Interval: g.cfg.Interval, Timeout: g.cfg.Timeout,
		StartPeriod: g.cfg.StartPeriod, Retries: g.cfg.Retries, Env: g.env, Log: g.log, Cgroup: g.cg, Guard: g.guard,
		OnFail: func(err error) {
			g.notify.status("stepping down: health check failed")
			g.stop(healthCause{err})
		},
	})
}

// end stops the checks and waits for them.
func (g *healthGate) end() {
	if g != nil && g.h != nil {
		g.h.Stop()
	}
}
