package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/dispatch"
	"github.com/leaderrun/leaderrun/internal/pingwire"
	"github.com/leaderrun/leaderrun/internal/redact"
	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/lease"
)

// The run form's one validation pass: the flags' values, bound to options,
// become the run's config (run.Config), and a value that cannot work is
// refused with what it means and what would do, before anything starts:
// bad input never starts a child. A flag's syntax was checked as it was
// read (values.go); what is checked here is its meaning.

// remindEvery is how often a waiting run says it still waits (at -v);
// tests shorten it.
var remindEvery = time.Minute

// DefaultOncePerZone is the time zone of --once-per's calendar periods
// when --once-per-zone is not given: UTC, so that hosts set to different
// zones still agree on when a day begins.
const DefaultOncePerZone = "UTC"

// runConfig validates o, the run form's flags, for COMMAND args.
func runConfig(o *options, args []string, e env, log *slog.Logger) (run.Config, error) {
	rc := o.run
	rc.Args, rc.Environ, rc.Getenv, rc.Log, rc.Version, rc.RemindEvery = args, e.environ(), e.getenv, log, version(), remindEvery
	rc.GuardProgram, rc.GuardTrusted = e.origin.GuardPath(), dispatch.Trusted(e.origin.GuardPath())
	rc.Stdin, rc.Stdout, rc.Stderr = e.stdio.In, e.stdio.Out, e.stdio.Err
	rc.OpenStore = func(ctx context.Context, oo lease.OpenOptions) (lease.Store, error) {
		s, err := openStoreFor(ctx, o.store, o.spell, oo)
		if err != nil {
			return s, err // its one line says which store
		}
		if o.store == "" {
			log.Debug("store: the default file store, which excludes only this host's processes")
		} else {
			log.Debug("store", "url", redact.URL(o.store))
		}
		return s, nil
	}
	if args[0] == "" {
		return rc, newOutcome(run.ExitNotFound, slog.LevelError, "the command name after -- is empty: nothing to run", "event", "not_found")
	}
	var err error
	if rc.Name, err = leaseName(o, args[0]); err != nil {
		return rc, err
	}
	if rc.Holder, err = holderLabel(rc.Holder, o.spell); err != nil {
		return rc, err
	}
	if err := behaviour(o, &rc); err != nil {
		return rc, err
	}
	if rc.Slots, err = slots(rc, o.spell); err != nil {
		return rc, err
	}
	t := &rc.Timing
	t.Explicit.RenewEvery = o.isGiven(&o.run.Timing.RenewEvery)
	t.Explicit.Grace = o.isGiven(&o.run.Timing.Grace)
	t.Explicit.CallTimeout = o.isGiven(&o.run.Timing.CallTimeout)
	t.Spell = o.spell
	if t.TTL <= 0 {
		return rc, usagef("%s: want a positive duration such as 15s", o.spell("ttl", lease.FormatDuration(t.TTL)))
	}
	if rc.Health, err = health(o, t.TTL); err != nil {
		return rc, err
	}
	if rc.Monitor, err = monitor(o); err != nil {
		return rc, err
	}
	if rc.Slots > 1 && rc.Monitor.PodLabel.Key != "" {
		// Each holder takes the label off every other Pod that has it.
		return rc, usagef("%s with %s: a label marks the one leader's Pod, and each of %d holders would take it off the others; leave out one of them", o.flag("pod-label"), o.spell("slots", strconv.Itoa(rc.Slots)), rc.Slots)
	}
	rc.Warnings = fileStoreInCI(o, e)
	return rc, nil
}

// fileStoreInCI warns of a run in a CI job on the default file store: a CI
// job runs on a runner of its own, where that lease excludes nothing
// (every runner would run the job). Naming a file store (file:///DIR)
// says that a lease on one host is what is meant, and is not warned of.
func fileStoreInCI(o *options, e env) []run.Warning {
	if o.store != "" {
		return nil
	}
	if ci := ciVariable(e.getenv); ci != "" {
		return []run.Warning{{Msg: fmt.Sprintf("%s is set, and no --store is given: the default file store excludes only this host's processes, not another runner's; give --store a network store's URL (docs/stores.md), or --store file:///DIR for a lease on this host alone", ci), Event: "file_store_in_ci"}}
	}
	return nil
}

// ciVariable returns the variable that says this is a CI job (CI, as
// GitHub Actions, GitLab CI, CircleCI, Buildkite and others set it;
// JENKINS_URL; TF_BUILD, Azure Pipelines'), or "" outside one.
func ciVariable(getenv func(string) string) string {
	for _, v := range []string{"CI", "JENKINS_URL", "TF_BUILD"} {
		if s := strings.TrimSpace(getenv(v)); s != "" {
			if b, ok := parseBool(s); ok && !b {
				continue // CI=false
			}
			return v
		}
	}
	return ""
}

// leaseName is --name, or else the command's base name, checked.
func leaseName(o *options, command string) (string, error) {
	name := o.run.Name
	if name == "" {
		if run.IsLauncher(command) {
			return "", usagef("%s is a shell, interpreter or wrapper: as the default lease name it would make every job it runs share one lease; give --name", filepath.Base(command))
		}
		name = filepath.Base(command)
	}
	if err := lease.ValidateName(name); err != nil {
		if !o.isGiven(&o.run.Name) {
			return "", usagef("cannot use the command's name %q as the lease name; give --name", filepath.Base(command))
		}
		return "", usagef("%s: %w", o.flag("name"), err)
	}
	return name, nil
}

// holderLabel is --holder, or else hostname:pid, checked; spell names the
// flag.
func holderLabel(holder string, spell lease.FlagSpeller) (string, error) {
	if holder == "" {
		host, _ := os.Hostname()
		holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if len(holder) > 200 || strings.ContainsAny(holder, "\n\r") {
		return "", usagef("%s must be one line of at most 200 bytes", spell("holder", ""))
	}
	if err := say.CheckPrintable(holder); err != nil {
		return "", usagef("%s: %v", spell("holder", strconv.Quote(holder)), err)
	}
	return holder, nil
}

// behaviour checks the flags that say how to wait, stop, contain and
// record: --wait/--no-wait, --contain, --stop-signal, --conflict-exit-code,
// --priority, --priority-step, --pass-env, --hold-at-least, --history-keep
// and --once-per's.
func behaviour(o *options, rc *run.Config) error {
	var err error
	if rc.Wait, err = parseWait(o.wait, o.spell); err != nil {
		return err
	}
	if o.noWait {
		rc.Wait = 0
	}
	rc.WaitGiven = o.isGiven(&o.wait) || o.isGiven(&o.noWait)
	if rc.Contain, err = parseContain(o.contain, o.spell); err != nil {
		return err
	}
	if rc.StopSignal, err = parseSignal(o.stopSignal, o.spell); err != nil {
		return err
	}
	if rc.ConflictCode < 0 || rc.ConflictCode > 255 {
		return usagef("%s: want 0-255", o.spell("conflict-exit-code", strconv.Itoa(rc.ConflictCode)))
	}
	if rc.Priority < -run.MaxPriority || rc.Priority > run.MaxPriority {
		return usagef("%s: want a whole number from -%d to %d", o.spell("priority", strconv.Itoa(rc.Priority)), run.MaxPriority, run.MaxPriority)
	}
	if rc.PriorityStep < 0 || rc.PriorityStep > run.MaxPriorityStep || (o.isGiven(&o.run.PriorityStep) && rc.PriorityStep < time.Millisecond) {
		return usagef("%s: want a duration from 1ms to %s", o.spell("priority-step", lease.FormatDuration(rc.PriorityStep)), lease.FormatDuration(run.MaxPriorityStep))
	}
	if rc.PassEnv, err = parsePassEnv(o.passEnv.Value(), o.spell); err != nil {
		return err
	}
	if rc.Hold < 0 || rc.Hold > run.MaxHold {
		return usagef("%s: want a duration from 0 to %s (31 days: a monthly schedule's slot)", o.spell("hold-at-least", lease.FormatDuration(rc.Hold)), lease.FormatDuration(run.MaxHold))
	}
	if rc.HistoryKeep < 0 || rc.HistoryKeep > lease.MaxHistoryKeep {
		return usagef("%s: want 0 (record nothing) to %d runs", o.spell("history-keep", strconv.Itoa(rc.HistoryKeep)), lease.MaxHistoryKeep)
	}
	rc.OncePer, err = oncePer(o, rc.HistoryKeep)
	return err
}

func parseWait(s string, spell lease.FlagSpeller) (time.Duration, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "forever", "inf", "infinity", "-1":
		return lease.WaitForever, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, usagef("%s: want a duration such as 30s or 10m, 0 to try once, or forever", spell("wait", strconv.Quote(s)))
	}
	return d, nil
}

func parseSignal(s string, spell lease.FlagSpeller) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		sig := syscall.Signal(n)
		if n <= 0 || n > 64 || sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
			return 0, usagef("%s: want a catchable signal such as TERM, INT or HUP", spell("stop-signal", s))
		}
		return sig, nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	if sig == 0 || sig == unix.SIGKILL || sig == unix.SIGSTOP {
		return 0, usagef("%s: want a catchable signal such as TERM, INT or HUP", spell("stop-signal", s))
	}
	return sig, nil
}

func parseContain(s string, spell lease.FlagSpeller) (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(s)); m {
	case "", run.ContainAuto:
		return run.ContainAuto, nil
	case run.ContainCgroup, run.ContainGroup:
		return m, nil
	}
	return "", usagef("%s: want auto, cgroup or group", spell("contain", strconv.Quote(s)))
}

// parsePassEnv validates --pass-env: every name must be one leaderrun would
// otherwise remove, so a typo does not silently keep nothing.
func parsePassEnv(names []string, spell lease.FlagSpeller) (map[string]bool, error) {
	keep := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(run.RemovableVars(), n) {
			return nil, usagef("%s: leaderrun never removes %s from the child's environment; it removes only %s", spell("pass-env", n), n, strings.Join(run.RemovableVars(), ", "))
		}
		keep[n] = true
	}
	return keep, nil
}

// slots checks --slots and refuses what it cannot be combined with; spell
// names the flags.
func slots(rc run.Config, spell lease.FlagSpeller) (int, error) {
	n := rc.Slots
	if n < 1 || n > lease.MaxSlots {
		return 0, usagef("%s: want a whole number from 1 to %d", spell("slots", strconv.Itoa(n)), lease.MaxSlots)
	}
	if lease.SlotHolder(lease.Holder{Label: rc.Holder}).Slots != 0 {
		// The store records a slot's holder as "LABEL (slot K of N)".
		return 0, usagef("%s ends like the label of a slot's holder, \"(slot K of N)\"; choose another", spell("holder", strconv.Quote(rc.Holder)))
	}
	if n > 1 && rc.OncePer.On {
		return 0, usagef("%s with --once-per or --once-within: a job run once per period has one holder; leave out one of them", spell("slots", strconv.Itoa(n)))
	}
	return n, nil
}

// health checks the --health-* flags against each other and the lease's
// TTL. The checks do not take part in the lease's safety (the keeper
// renews and stops on its own deadlines whatever a check does), so what is
// refused is what cannot work as written: a check longer than the interval
// between checks (they never overlap), and a check allowed to hang longer
// than the lease lasts, which would let a stalled leader block the others
// for longer than a dead one does. Only values given (flag or variable) are
// refused; a default adapts to them, as --grace does to a short --ttl: the
// timeout shrinks to a short interval (and below a short TTL, to half of
// it), the interval grows to a long timeout.
func health(o *options, ttl time.Duration) (run.HealthConfig, error) {
	h0 := &o.run.Health // the bound fields, for isGiven
	h := *h0
	if h.Cmd == "" {
		for _, f := range []struct {
			name string
			dest any
		}{{"health-interval", &h0.Interval}, {"health-timeout", &h0.Timeout}, {"health-retries", &h0.Retries}, {"health-start-period", &h0.StartPeriod}} {
			if o.isGiven(f.dest) {
				return h, usagef("%s without --health-cmd: give the check to run, or leave --%s out", o.flag(f.name), f.name)
			}
		}
		return h, nil
	}
	if !o.isGiven(&h0.Timeout) {
		h.Timeout = min(h.Timeout, h.Interval)
		if h.Timeout >= ttl {
			h.Timeout = ttl / 2
		}
	}
	if !o.isGiven(&h0.Interval) && o.isGiven(&h0.Timeout) {
		h.Interval = max(h.Interval, h.Timeout)
	}
	show := lease.FormatDuration
	switch {
	case strings.TrimSpace(h.Cmd) == "":
		return h, usagef("%s is blank: give a command such as 'curl -fsS http://127.0.0.1:8080/health'", o.flag("health-cmd"))
	case h.Interval < run.MinHealthInterval:
		return h, usagef("%s: want at least %s", o.spell("health-interval", show(h.Interval)), show(run.MinHealthInterval))
	case h.Timeout <= 0:
		return h, usagef("%s: want a positive duration such as 5s", o.spell("health-timeout", show(h.Timeout)))
	case h.Timeout > h.Interval:
		return h, usagef("%s is longer than %s: checks never overlap, so one may take at most the interval; use --health-timeout %s or less, or a longer interval", o.spell("health-timeout", show(h.Timeout)), o.spell("health-interval", show(h.Interval)), show(h.Interval))
	case h.Timeout >= ttl:
		return h, usagef("%s is not shorter than %s: a hung check would keep a stalled leader in place longer than a dead one's lease takes to expire; use --health-timeout below %s, or a longer --ttl", o.spell("health-timeout", show(h.Timeout)), o.spell("ttl", show(ttl)), show(ttl))
	case h.Retries < 1:
		return h, usagef("%s: want at least 1", o.spell("health-retries", strconv.Itoa(h.Retries)))
	case h.StartPeriod < 0:
		return h, usagef("%s: want 0 or a positive duration", o.spell("health-start-period", show(h.StartPeriod)))
	}
	return h, nil
}

// oncePer checks --once-per, --once-within and their companions
// (--once-per-zone, --once-per-deadline, --once-per-any,
// --once-per-exit-code). historyKeep is --history-keep: the decision reads
// the history, so recording none is refused.
func oncePer(o *options, historyKeep int) (run.OncePerConfig, error) {
	op := o.run.OncePer // --once-within, --once-per-deadline, --once-per-any and --once-per-exit-code bound
	within := o.isGiven(&o.run.OncePer.Within)
	if o.oncePer == "" && !within {
		// A modifier alone would be ignored: an hourly job would run every
		// hour while its author believes it runs once a day.
		for _, m := range []struct {
			name  string
			field any
		}{{"once-per-zone", &o.oncePerZone}, {"once-per-deadline", &o.run.OncePer.Deadline}, {"once-per-any", &o.run.OncePer.Any}, {"once-per-exit-code", &o.run.OncePer.Code}} {
			if o.isGiven(m.field) {
				return run.OncePerConfig{}, usagef("%s needs --once-per PERIOD, without which it has no effect", o.flag(m.name))
			}
		}
		return run.OncePerConfig{}, nil
	}
	flag, err := o.flag("once-per"), error(nil)
	if within {
		flag, err = o.flag("once-within"), onceWithin(o, &op)
	} else {
		err = oncePerPeriod(o, &op)
	}
	if err != nil {
		return op, err
	}
	if historyKeep == 0 {
		return op, usagef("%s reads the run history, and %s records none; leave --history-keep out or give it at least 1", flag, o.spell("history-keep", "0"))
	}
	op.On = true
	if op.Code < 0 || op.Code > 255 {
		return op, usagef("%s: want 0-255", o.spell("once-per-exit-code", strconv.Itoa(op.Code)))
	}
	return op, nil
}

// oncePerPeriod reads --once-per PERIOD in --once-per-zone, and
// --once-per-deadline, into op.
func oncePerPeriod(o *options, op *run.OncePerConfig) error {
	loc, err := loadZone(o.oncePerZone, o.spell)
	if err != nil {
		return err
	}
	if op.Period, err = lease.ParsePeriod(o.oncePer, loc); err != nil {
		if lease.IsSchedule(o.oncePer) {
			// What is wrong with the schedule (lease.ErrBadPeriod).
			return usagef("%s: %v", o.flag("once-per"), err)
		}
		// Its one error (lease.ErrBadPeriod), said of the flag.
		return usagef("%s: want %s", o.spell("once-per", strconv.Quote(o.oncePer)), lease.PeriodForms())
	}
	if !op.Period.Calendar() && loc != time.UTC {
		return usagef("%s applies to hour, day, week, month and cron schedules; a duration such as %s is counted from the Unix epoch in UTC", o.spell("once-per-zone", o.oncePerZone), o.spell("once-per", o.oncePer))
	}
	if o.isGiven(&o.run.OncePer.Deadline) && op.Deadline <= 0 {
		return usagef("%s: want a positive duration, such as 2h (a period not run within 2h of its start is not run late)", o.spell("once-per-deadline", lease.FormatDuration(op.Deadline)))
	}
	return nil
}

// onceWithin checks --once-within D, which replaces --once-per's period
// with the last D and takes no zone or deadline.
func onceWithin(o *options, op *run.OncePerConfig) error {
	switch {
	case o.oncePer != "":
		return usagef("%s with %s: give one of them (--once-per: once in each period; --once-within: once in any span of that length)", o.flag("once-within"), o.flag("once-per"))
	case op.Within < lease.MinPeriod || op.Within > lease.MaxPeriod:
		return usagef("%s: want a duration from %s to %s, such as 24h", o.spell("once-within", lease.FormatDuration(op.Within)), lease.FormatDuration(lease.MinPeriod), lease.FormatDuration(lease.MaxPeriod))
	case o.isGiven(&o.oncePerZone):
		return usagef("%s applies to --once-per's calendar periods, not to --once-within's span, which no zone changes", o.flag("once-per-zone"))
	case o.isGiven(&o.run.OncePer.Deadline):
		return usagef("%s applies to --once-per's periods; --once-within's span starts whenever the last run did", o.flag("once-per-deadline"))
	}
	return nil
}

// loadZone reads --once-per-zone: an IANA zone name (Europe/Berlin), UTC,
// or Local for this host's zone (TZ, /etc/localtime).
func loadZone(zone string, spell lease.FlagSpeller) (*time.Location, error) {
	switch strings.TrimSpace(zone) {
	case "", "UTC", "utc", "Z":
		return time.UTC, nil
	case "Local", "local":
		return time.Local, nil
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || strings.ContainsAny(zone, "\n\r") {
		if near := zoneCase(zone); near != "" {
			return nil, usagef("%s: no such zone; did you mean %s? (zone names are case-sensitive)", spell("once-per-zone", strconv.Quote(zone)), near)
		}
		return nil, usagef("%s: want an IANA time zone name such as Europe/Berlin (from /usr/share/zoneinfo), UTC, or Local", spell("once-per-zone", strconv.Quote(zone)))
	}
	return loc, nil
}

// monitor checks --ping, --ping-format, --ping-skipped,
// --ping-output-tail, --metrics-file,
// --pod-label and --listen.
func monitor(o *options) (run.MonitorConfig, error) {
	m := o.run.Monitor // --ping-skipped and --metrics-file bound
	if err := run.CheckMetricsFile(m.MetricsFile, o.spell); err != nil {
		return m, err
	}
	if o.isGiven(&o.podLabel) {
		var err error
		if m.PodLabel, err = run.ParsePodLabel(o.podLabel, o.spell); err != nil {
			return m, err
		}
	}
	if o.isGiven(&o.listen) {
		var err error
		if m.Listen, err = run.ListenAddr(o.listen, o.spell); err != nil {
			return m, err
		}
		if m.ListenProgram, err = run.FindListenProgram(); err != nil {
			return m, err
		}
	}
	if o.ping == "" {
		if m.PingSkipped {
			return m, usagef("%s needs --ping URL", o.flag("ping-skipped"))
		}
		if o.isGiven(&o.pingFormat) {
			return m, usagef("%s needs --ping URL", o.flag("ping-format"))
		}
		if m.OutputTail != 0 {
			return m, usagef("%s needs --ping URL", o.flag("ping-output-tail"))
		}
		return m, nil
	}
	if len(o.ping) > pingwire.MaxURL {
		return m, usagef("%s: the URL is %d bytes; at most %d are accepted (not shown: it may hold a secret)", o.flag("ping"), len(o.ping), pingwire.MaxURL)
	}
	u, err := url.Parse(o.ping)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		// Not even the host: a URL that does not parse may have its key
		// anywhere.
		return m, usagef("%s: want an http:// or https:// URL such as https://hc-ping.com/UUID (not shown: it may hold a secret)", o.flag("ping"))
	}
	format, ok := pingwire.ParseFormat(o.pingFormat, u)
	if !ok {
		return m, usagef("%s: want auto, hc, kuma, cronitor or betterstack", o.spell("ping-format", strconv.Quote(o.pingFormat)))
	}
	if m.PingSkipped && !format.HasLog() {
		return m, usagef("%s: %s has no event that records a line without changing the check's state (only hc has: URL/log)", o.flag("ping-skipped"), o.spell("ping-format", fmt.Sprint(format)))
	}
	if m.OutputTail < 0 || m.OutputTail > pingwire.MaxTail {
		return m, usagef("%s: want 0 (off) to %d bytes (healthchecks.io keeps the first 100 kB of a ping's body)", o.spell("ping-output-tail", strconv.Itoa(m.OutputTail)), pingwire.MaxTail)
	}
	m.PingFormat = format
	if m.PingProgram, err = run.FindPingProgram(); err != nil {
		return m, err
	}
	m.Ping = u
	return m, nil
}
