package e2e

// --once-per on the file store, Redis, PostgreSQL, etcd and Azure: three
// contenders ticking every second run COMMAND exactly once per period, a
// period in which none ran is caught up at the next tick, and a run whose
// leaderrun was killed is retried by the next tick in the same period.

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestOncePer runs testOncePer on each store at once, in one of the
// package's parallel slots: its ticks wait for periods, not for a core
// (Kubernetes': TestKubernetesOncePer, in the suite's Kubernetes phase).
func TestOncePer(t *testing.T) {
	t.Parallel()
	together(t, map[string]func(*testing.T){
		"file": func(t *testing.T) {
			testOncePer(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "daily", "2s", true)
		},
		"redis": func(t *testing.T) {
			_, env := redisE2EShared(t)
			testOncePer(t, env, e2eName(t, "daily"), "2s", true)
		},
		"postgres": func(t *testing.T) {
			_, env := pgE2EShared(t)
			testOncePer(t, env, e2eName(t, "daily"), "2s", true)
		},
		"etcd": func(t *testing.T) {
			_, env := etcdE2EShared(t)
			testOncePer(t, env, e2eName(t, "daily"), "2s", false)
		},
		"azure": func(t *testing.T) {
			_, store := azShared(t, "poll=200ms")
			testOncePer(t, append(azEnv(azDevKey), "LEADERRUN_STORE="+store), "daily", "15s", true)
		},
	})
}

// oncePerPeriod is the short period the contenders tick in.
const oncePerPeriod = 4 * time.Second

// tick runs one contender's leaderrun --once-per to completion: it
// returns its exit code and stderr. The child appends its fencing token to
// marks.
func tick(env []string, holder, name, period, ttl, marks string) (int, string, error) {
	args := []string{"--once-per", period, "--name", name, "--holder", holder, "--ttl", ttl}
	args = append(args, "--", "sh", "-c", `echo "$LEADERRUN_LEASE_TOKEN" >> "$0"`, marks)
	cmd := exec.Command(lrBin, args...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1", "TZ=UTC"), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String(), nil
	}
	return 0, stderr.String(), err
}

// marked reads the tokens the children appended to marks, in order.
func marked(t *testing.T, marks string) []uint64 {
	t.Helper()
	b, err := os.ReadFile(marks)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var toks []uint64
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("marks %q: %v", b, err)
		}
		toks = append(toks, n)
	}
	return toks
}

// periodOf is the period --once-per decided r in: by the grant on the
// store's clock where the store records one (the token's clock reading and
// the grant are two readings, and a period's boundary can fall between
// them: PostgreSQL's differed by 148 µs under load, and the run decided
// for the next period looked, by its token, like a second run in this
// one), else by the token where it counts the store's clock, else by the
// start on this host's clock.
func periodOf(r histRun, clockTokens bool) int64 {
	us := r.Token
	switch {
	case clockTokens && !r.Granted.IsZero():
		us = uint64(r.Granted.UnixMicro())
	case !clockTokens:
		us = uint64(r.Start.UnixMicro())
	}
	return int64(us) / oncePerPeriod.Microseconds()
}

func testOncePer(t *testing.T, env []string, name, ttl string, clockTokens bool) {
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")

	// Three contenders, each ticking every second (cron's "every hour",
	// sped up) with the default --wait (forever), for five periods.
	stop := time.Now().Add(5 * oncePerPeriod)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	notNeeded := 0
	var ticks [][2]time.Time // each tick's start and end
	for h := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := time.Now(); next.Before(stop); next = next.Add(time.Second) {
				time.Sleep(time.Until(next)) // the schedule itself, not a synchronisation
				began := time.Now()
				code, stderr, err := tick(env, fmt.Sprintf("host%d", h), name, oncePerPeriod.String(), ttl, marks)
				mu.Lock()
				ticks = append(ticks, [2]time.Time{began, time.Now()})
				switch {
				case err != nil || code != 0:
					failures = append(failures, fmt.Sprintf("host%d: exit %d, %v: %s", h, code, err, stderr))
				case strings.Contains(stderr, "already done this 4s period"):
					notNeeded++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("ticks failed:\n%s", strings.Join(failures, "\n"))
	}
	runs := history(t, env, name, "--limit", "0")
	toks := marked(t, marks)
	if len(runs) != len(toks) {
		t.Fatalf("%d children ran (%v) but the history has %d runs: %+v", len(toks), toks, len(runs), runs)
	}
	periods := map[int64][]uint64{}
	for _, r := range runs {
		if r.Outcome != "ok" || !slices.Contains(toks, r.Token) {
			t.Fatalf("run %+v: want ok, and its child's mark among %v", r, toks)
		}
		p := periodOf(r, clockTokens)
		periods[p] = append(periods[p], r.Token)
	}
	first, last := slices.Min(slices.Collect(maps.Keys(periods))), slices.Max(slices.Collect(maps.Keys(periods)))
	// Never two runs in a period; and one in every period that a whole
	// tick fell in (its acquisition and its decision came in the period,
	// and found it done or ran it). On a loaded host a tick can take
	// longer than a period, waiting for the lease or for the store (the
	// servers run here, on this host's clock), and a period that no tick
	// spanned may have no run.
	within := func(p int64) bool {
		for _, tk := range ticks {
			if tk[0].UnixMicro()/oncePerPeriod.Microseconds() == p && tk[1].UnixMicro()/oncePerPeriod.Microseconds() == p {
				return true
			}
		}
		return false
	}
	for p := first; p <= last; p++ {
		if n := len(periods[p]); n > 1 || n == 0 && within(p) {
			t.Fatalf("period %d has %d runs (%v); want one in each period from %d to %d (and in this one, which a whole tick fell in), never two: %+v", p, n, periods[p], first, last, runs)
		}
	}
	if last-first < 3 || notNeeded < 3*int(last-first) {
		t.Fatalf("runs in periods %d–%d and %d ticks found the period done; want 4 periods or more, each with ticks that found it done", first, last, notNeeded)
	}
	t.Logf("%d periods with one run each; %d ticks found the period done", last-first+1, notNeeded)

	// Nobody ticks for a whole period: the next tick catches it up.
	time.Sleep(time.Until(time.UnixMicro((last + 2) * oncePerPeriod.Microseconds()).Add(100 * time.Millisecond)))
	if code, stderr, err := tick(env, "late", name, oncePerPeriod.String(), ttl, marks); err != nil || code != 0 || !strings.Contains(stderr, "no successful run yet") {
		t.Fatalf("the first tick after an idle period: exit %d, %v: %s", code, err, stderr)
	}
	after := history(t, env, name, "--limit", "1")
	if p := periodOf(after[0], clockTokens); p < last+2 || after[0].Holder != "late" || after[0].Outcome != "ok" {
		t.Fatalf("catch-up run %+v in period %d; want one by late in period %d or later", after[0], p, last+2)
	}

	// A run killed with its leaderrun (SIGKILL) did not succeed: the next
	// tick in the same period runs again; the one after does not. The
	// period is a leap year long, so that no boundary falls in between.
	const long = "8784h"
	killedName := name + "-killed"
	a, tok := holdWithToken(t, env, killedName, "--once-per", long, "--ttl", ttl)
	waitRunning(t, env, killedName, tok)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.wait()
	killedMarks := filepath.Join(dir, "killed")
	if code, stderr, err := tick(env, "retry", killedName, long, ttl, killedMarks); err != nil || code != 0 || len(marked(t, killedMarks)) != 1 {
		t.Fatalf("the tick after a killed run: exit %d, %v, marks %v; want a run: %s", code, err, marked(t, killedMarks), stderr)
	}
	if code, stderr, err := tick(env, "done", killedName, long, ttl, killedMarks); err != nil || code != 0 || len(marked(t, killedMarks)) != 1 || !strings.Contains(stderr, "already done") {
		t.Fatalf("the tick after the retry: exit %d, %v, marks %v; want no run: %s", code, err, marked(t, killedMarks), stderr)
	}
	got := history(t, env, killedName, "--limit", "0")
	if len(got) != 2 || got[0].Holder != "retry" || got[0].Outcome != "ok" || got[1].Token != tok || !got[1].End.IsZero() {
		t.Fatalf("history %+v; want the retry's success over the killed run's start without an end", got)
	}
}

func init() { readmeChecks["once-per-cron"] = readmeOncePerCron }

// once-per-cron (docs/usage.md): every host runs the crontab line; the
// first run does the job, later ticks in the same day exit 0, print
// nothing (cron mails any output) and start nothing.
func readmeOncePerCron(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	env := fx.cronEnv()
	c := b.take(t, "")
	for readmeCronVarRE.MatchString(c.text) {
		k, _, _ := strings.Cut(c.text, "=")
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
		env = append(env, fx.subst(t, c.text))
		c = b.take(t, "")
	}
	fields := strings.Fields(c.text)
	if len(fields) < 6 || !strings.Contains(c.text, "--once-per day") {
		t.Fatalf("%s:%d: %q is not a crontab line with --once-per day", b.file, c.line, c.text)
	}
	cmd := fx.subst(t, strings.Join(fields[5:], " "))
	fx.installed(t)
	job := afterDashDash(t, strings.Fields(cmd))[0]
	fx.underRoot(t, job)
	marks := filepath.Join(fx.work, "oncepercron.marks")
	writeScript(t, job, fmt.Sprintf("echo ran >> %s\n", marks))
	if start, end := time.Now().UTC().Truncate(24*time.Hour), time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour); time.Until(end) < time.Minute {
		t.Skipf("the UTC day %s ends within a minute", start.Format(time.DateOnly))
	}
	for i := range 3 {
		code, out, stderr := shOut(t, env, fx.root, cmd)
		if code != 0 || out != "" || stderr != "" {
			t.Fatalf("%s:%d: tick %d: exit %d, stdout %q, stderr %q; want 0 and nothing", b.file, c.line, i+1, code, out, stderr)
		}
	}
	if got, _ := os.ReadFile(marks); string(got) != "ran\n" {
		t.Fatalf("the job's runs: %q; want one", got)
	}
}

// --once-per with the fencing counter ahead of the store's clock (here
// 90 s, within lease.MaxClockSkew, which is followed: a counter written
// ahead by hand, or left by a clock that stepped back): every acquisition
// in that lead gets a token just above the counter, so periods decided
// from tokens were all one period, and a tick in the next period found
// the job "already done" (the job ran once in the counter's whole lead).
// Decided on the store's clock at the grant, a tick in each of two
// periods runs the job.
func TestRedisOncePerCounterAhead(t *testing.T) {
	t.Parallel()
	addr, env := redisE2EShared(t)
	name := e2eName(t, "ahead")
	ahead := time.Now().Add(90 * time.Second).UnixMicro()
	redisE2ECLI(t, addr, "SET", "leaderrun:{"+name+"}:token", strconv.FormatInt(ahead, 10))
	marks := filepath.Join(t.TempDir(), "marks")
	const period = 4 * time.Second
	for i := range 2 {
		// Each tick 1 s into a period of its own (the store runs on this
		// host, so its clock and this one agree): the schedule, not a
		// synchronisation.
		next := time.Now().Truncate(period).Add(period + time.Second)
		time.Sleep(time.Until(next))
		code, stderr, err := tick(env, fmt.Sprint("h", i), name, period.String(), "2s", marks)
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 || !strings.Contains(stderr, "on the store's clock") {
			t.Fatalf("tick %d, in a period of its own: exit %d: %s", i, code, stderr)
		}
		if toks := marked(t, marks); len(toks) != i+1 || toks[i] <= uint64(ahead) {
			t.Fatalf("tick %d: the job's tokens %v; want %d runs, each above the counter %d: %s", i, toks, i+1, ahead, stderr)
		}
	}
}
