package cmd

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// MinHealthInterval is the shortest --health-interval: a shell started more
// than ten times a second only loads the machine the leader runs on.
const MinHealthInterval = 100 * time.Millisecond

// healthFlags are the flags that mean something only with --health-cmd.
var healthFlags = []string{"health-interval", "health-timeout", "health-retries", "health-start-period"}

// healthConfig is the validated form of the --health-* flags; cmd "" means
// no checks.
type healthConfig struct {
	cmd         string
	interval    time.Duration
	timeout     time.Duration
	startPeriod time.Duration
	retries     int
}

// parseHealth validates the --health-* flags against each other and the
// lease's TTL. The checks do not take part in the lease's safety (the keeper
// renews and stops on its own deadlines whatever a check does), so what is
// refused is what cannot work as written: a check longer than the interval
// between checks (they never overlap), and a check allowed to hang longer
// than the lease lasts, which would let a stalled leader block the others
// for longer than a dead one does. Only values given (flag or variable) are
// refused; a default adapts to them, as --grace does to a short --ttl: the
// timeout shrinks to a short interval (and below a short TTL, to half of
// it), the interval grows to a long timeout.
func parseHealth(c *cli.Context, ttl time.Duration) (healthConfig, error) {
	h := healthConfig{
		cmd:         c.String("health-cmd"),
		interval:    c.Duration("health-interval"),
		timeout:     c.Duration("health-timeout"),
		startPeriod: c.Duration("health-start-period"),
		retries:     c.Int("health-retries"),
	}
	if h.cmd == "" {
		for _, f := range healthFlags {
			if c.IsSet(f) {
				return h, usagef("--%s without --health-cmd: give the check to run, or leave --%s out", f, f)
			}
		}
		return h, nil
	}
	if !c.IsSet("health-timeout") {
		h.timeout = min(h.timeout, h.interval)
		if h.timeout >= ttl {
			h.timeout = ttl / 2
		}
	}
	if !c.IsSet("health-interval") && c.IsSet("health-timeout") {
		h.interval = max(h.interval, h.timeout)
	}
	show := lease.FormatDuration
	switch {
	case strings.TrimSpace(h.cmd) == "":
		return h, usagef("--health-cmd is blank: give a command such as 'curl -fsS http://127.0.0.1:8080/health'")
	case h.interval < MinHealthInterval:
		return h, usagef("--health-interval %s: want at least %s", show(h.interval), show(MinHealthInterval))
	case h.timeout <= 0:
		return h, usagef("--health-timeout %s: want a positive duration such as 5s", show(h.timeout))
	case h.timeout > h.interval:
		return h, usagef("--health-timeout %s is longer than --health-interval %s: checks never overlap, so one may take at most the interval; use --health-timeout %s or less, or a longer interval", show(h.timeout), show(h.interval), show(h.interval))
	case h.timeout >= ttl:
		return h, usagef("--health-timeout %s is not shorter than --ttl %s: a hung check would keep a stalled leader in place longer than a dead one's lease takes to expire; use --health-timeout below %s, or a longer --ttl", show(h.timeout), show(ttl), show(ttl))
	case h.retries < 1:
		return h, usagef("--health-retries %d: want at least 1", h.retries)
	case h.startPeriod < 0:
		return h, usagef("--health-start-period %s: want 0 or a positive duration", show(h.startPeriod))
	}
	return h, nil
}

// healthCause is the cause of the run's end when the health check failed.
type healthCause struct{ err error }

func (h healthCause) Error() string { return h.err.Error() }
func (h healthCause) Unwrap() error { return h.err }

// healthGate starts the checks when the child has started and stops the run
// when they fail. A nil *healthGate does nothing.
type healthGate struct {
	cfg    healthConfig
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
		Cmd: g.cfg.cmd, Interval: g.cfg.interval, Timeout: g.cfg.timeout,
		StartPeriod: g.cfg.startPeriod, Retries: g.cfg.retries, Env: g.env, Log: g.log, Cgroup: g.cg, Guard: g.guard,
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
