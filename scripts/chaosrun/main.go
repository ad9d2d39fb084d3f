// Command chaosrun drives scripts/chaos.sh: N contenders, each a loop of
// `leaderrun … -- chaosrun child`, on one lease name, while faults are
// injected at random; and the child those runs start. Everything it knows
// goes to JSON-lines logs in one directory, which scripts/chaoscheck reads.
//
//	chaosrun run   -dir D -store file|redis|azurite|postgres|etcd|kubernetes -url URL -leaderrun BIN [flags]
//	chaosrun child (under leaderrun; reads CHAOS_DIR, CHAOS_CONTENDER, LEADERRUN_LEASE_TOKEN,
//	               and with -slots LEADERRUN_SLOT)
//
// With -slots N (N > 1) every leaderrun is given --slots N: up to N children
// run at once, each in its slot, and the fencing resource keeps one highest
// token per slot (a slot is a lease of its own).
//
// Logs (every time stamp is CLOCK_MONOTONIC in nanoseconds, comparable
// between processes of one host):
//
//	meta.json     the run's parameters (store, TTL, timing, contenders)
//	runs.log      child: start, end (with reason)
//	fence.log     the fencing resource: every write, accepted or rejected
//	wrappers.log  driver: each leaderrun started and its exit
//	faults.log    driver: each fault (pauses have a stop and a cont record)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// now returns CLOCK_MONOTONIC in nanoseconds: the same clock in every
// process of the host, so stamps from the children, the fence and the
// driver can be compared.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// logFile appends one JSON object per line; each line is one write(2) on an
// O_APPEND descriptor, so lines of concurrent writers never interleave.
type logFile struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &logFile{f: f}, nil
}

func (l *logFile) write(rec map[string]any) {
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "chaosrun: log:", err)
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chaosrun run|child [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "child":
		err = child()
	case "run":
		err = run(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaosrun:", err)
		os.Exit(1)
	}
}

// ---- the child ----

// child is the job leaderrun runs: it logs its start, writes to the fencing
// resource every few milliseconds for a random time, and logs its end (also
// when stopped by SIGTERM). A SIGKILLed child logs no end: its last fence
// write is the last sign of life the checker sees.
func child() error {
	dir := os.Getenv("CHAOS_DIR")
	tok := os.Getenv("LEADERRUN_LEASE_TOKEN")
	if tok == "" {
		tok = os.Getenv("LEADERRUN_TOKEN") // before the rename
	}
	token, err := strconv.ParseUint(tok, 10, 64)
	if dir == "" || err != nil {
		return fmt.Errorf("child: CHAOS_DIR or LEADERRUN_LEASE_TOKEN missing or bad")
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	runs, err := openLog(filepath.Join(dir, "runs.log"))
	if err != nil {
		return err
	}
	fence, err := openFence(dir)
	if err != nil {
		return err
	}
	pid, ppid := os.Getpid(), os.Getppid()
	contender := os.Getenv("CHAOS_CONTENDER")
	slot := -1 // no slots
	if v := os.Getenv("LEADERRUN_SLOT"); v != "" {
		if slot, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("child: LEADERRUN_SLOT %q", v)
		}
		fence.state += fmt.Sprintf(".%d", slot)
	}
	fence.slot = slot
	start := now()
	runs.write(map[string]any{"ev": "start", "t": start, "pid": pid, "wrapper": ppid, "contender": contender, "token": token, "slot": slot})
	// The current holder, for the fault injector: "WRAPPER CHILD".
	cur := filepath.Join(dir, fmt.Sprintf("current.%d", pid))
	if err := os.WriteFile(cur, fmt.Appendf(nil, "%d %d\n", ppid, pid), 0o644); err == nil {
		_ = os.Rename(cur, filepath.Join(dir, "current"))
	}

	// Mostly short runs (many handovers); some longer than the TTL, so a
	// paused leaderrun's lease can run out under a live child.
	ttl, _ := time.ParseDuration(os.Getenv("CHAOS_TTL"))
	d := time.Duration(50+rand.IntN(750)) * time.Millisecond
	if rand.IntN(6) == 0 && ttl > 0 {
		d = ttl/2 + rand.N(ttl)
	}
	tick := time.NewTicker(15 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	reason := "done"
	fence.write(pid, ppid, token)
loop:
	for {
		select {
		case <-tick.C:
			fence.write(pid, ppid, token)
		case <-deadline:
			break loop
		case s := <-term:
			reason = "signal " + s.String()
			break loop
		}
	}
	runs.write(map[string]any{"ev": "end", "t": now(), "pid": pid, "wrapper": ppid, "reason": reason})
	if reason != "done" {
		os.Exit(143)
	}
	return nil
}

// fence is the fencing resource: a file holding the highest token seen,
// guarded by flock. A write with a lower token is rejected; every decision
// is logged, stamped while the lock is held, so the log's order is the
// order of decisions.
type fence struct {
	lock  *os.File
	state string
	log   *logFile
	slot  int // -1 without slots; with them, state is the slot's own
}

func openFence(dir string) (*fence, error) {
	lf, err := os.OpenFile(filepath.Join(dir, "fence.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	lg, err := openLog(filepath.Join(dir, "fence.log"))
	if err != nil {
		return nil, err
	}
	return &fence{lock: lf, state: filepath.Join(dir, "fence.state"), log: lg}, nil
}

func (f *fence) write(pid, wrapper int, token uint64) {
	if err := unix.Flock(int(f.lock.Fd()), unix.LOCK_EX); err != nil {
		fmt.Fprintln(os.Stderr, "chaosrun: fence lock:", err)
		return
	}
	defer unix.Flock(int(f.lock.Fd()), unix.LOCK_UN) //nolint:errcheck // closing releases it anyway
	var high uint64
	if b, err := os.ReadFile(f.state); err == nil {
		high, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	ok := token >= high
	if token > high {
		tmp := fmt.Sprintf("%s.%d", f.state, pid)
		if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d\n", token), 0o644); err == nil {
			_ = os.Rename(tmp, f.state)
		}
	}
	f.log.write(map[string]any{"ev": "write", "t": now(), "pid": pid, "wrapper": wrapper, "token": token, "ok": ok, "high": high, "slot": f.slot})
}

// ---- the driver ----

type config struct {
	dir, store, url, leaderrun, name string
	duration, ttl                    time.Duration
	contenders                       int
	slots                            int // --slots for every leaderrun; 1: none
	seed                             uint64
	// Redis: the server redis.sh started (port, PID, its directory).
	redisPort int
	redisPID  int
	redisDir  string
	// Azurite: the azurite.sh directory (env file) and its binary.
	azuriteDir, azuriteBin string
	// PostgreSQL: the postgres.sh directory and where postgres.sh is.
	pgDir, pgScripts string
	// MySQL/MariaDB: the mariadb.sh directory and where mariadb.sh is.
	myDir, myScripts string
	// etcd: the etcd.sh directory of a three-member cluster.
	etcdDir string
	// Kubernetes: the kubernetes.sh directory.
	kubeDir string
	// S3: the versitygw.sh directory and the scripts directory.
	s3Dir, s3Scripts string
	// GCS: the fakegcs.sh directory and the scripts directory.
	gcsDir, gcsScripts string
	extra              []string // more leaderrun flags
}

func run(args []string) error {
	var c config
	var extra string
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&c.dir, "dir", "", "log directory")
	fs.StringVar(&c.store, "store", "file", "file, redis, azurite, postgres, mysql, etcd, kubernetes, s3 or gcs")
	fs.StringVar(&c.url, "url", "", "--store URL for leaderrun")
	fs.StringVar(&c.leaderrun, "leaderrun", "", "leaderrun binary")
	fs.StringVar(&c.name, "name", "chaos", "lease name")
	fs.DurationVar(&c.duration, "duration", 10*time.Minute, "how long to inject faults")
	fs.DurationVar(&c.ttl, "ttl", 3*time.Second, "--ttl for leaderrun")
	fs.IntVar(&c.contenders, "contenders", 20, "number of contenders")
	fs.IntVar(&c.slots, "slots", 1, "--slots for leaderrun (1: a plain lease)")
	fs.Uint64Var(&c.seed, "seed", 0, "random seed (0: from the clock)")
	fs.IntVar(&c.redisPort, "redis-port", 0, "Redis port")
	fs.IntVar(&c.redisPID, "redis-pid", 0, "Redis PID")
	fs.StringVar(&c.redisDir, "redis-dir", "", "redis.sh directory (its pids file lists every server started)")
	fs.StringVar(&c.azuriteDir, "azurite-dir", "", "azurite.sh directory (its env file names the PID)")
	fs.StringVar(&c.azuriteBin, "azurite-bin", "", "azurite-blob binary, for restarts")
	fs.StringVar(&c.pgDir, "pg-dir", "", "postgres.sh directory (env, pids, rundir)")
	fs.StringVar(&c.pgScripts, "pg-scripts", "scripts", "directory of postgres.sh, for restarts")
	fs.StringVar(&c.myDir, "my-dir", "", "mariadb.sh directory (env, pids, rundir)")
	fs.StringVar(&c.myScripts, "my-scripts", "scripts", "directory of mariadb.sh, for restarts")
	fs.StringVar(&c.etcdDir, "etcd-dir", "", "etcd.sh directory of a cluster (env, pids)")
	fs.StringVar(&c.kubeDir, "kube-dir", "", "kubernetes.sh directory (env, pids)")
	fs.StringVar(&c.s3Dir, "s3-dir", "", "versitygw.sh directory (env, pids)")
	fs.StringVar(&c.s3Scripts, "s3-scripts", "scripts", "directory of versitygw.sh, for restarts")
	fs.StringVar(&c.gcsDir, "gcs-dir", "", "fakegcs.sh directory (env, pids)")
	fs.StringVar(&c.gcsScripts, "gcs-scripts", "scripts", "directory of fakegcs.sh, for restarts")
	fs.StringVar(&extra, "leaderrun-flags", "", "more leaderrun flags, space separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.dir == "" || c.url == "" || c.leaderrun == "" {
		return errors.New("run: -dir, -url and -leaderrun are required")
	}
	c.extra = strings.Fields(extra)
	if c.slots > 1 {
		c.extra = append(c.extra, "--slots", strconv.Itoa(c.slots))
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(c.seed, c.seed>>1))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d, err := newDriver(ctx, c)
	if err != nil {
		return err
	}
	defer d.close()
	return d.run(ctx, rng)
}

type driver struct {
	c        config
	wrappers *logFile
	faults   *logFile
	store    storeFaults

	mu      sync.Mutex
	running map[int]*os.Process // wrapper PID → process, while it runs
	stopped map[int]bool        // wrappers currently SIGSTOPped by us
}

// storeFaults are the store-specific faults.
type storeFaults interface {
	// kinds lists the fault kinds the store offers.
	kinds() []string
	// inject runs one fault of that kind, logging it.
	inject(ctx context.Context, kind string, rng *rand.Rand) error
	// close resumes a paused server and releases clients.
	close()
}

func newDriver(ctx context.Context, c config) (*driver, error) {
	d := &driver{c: c, running: map[int]*os.Process{}, stopped: map[int]bool{}}
	var err error
	if d.wrappers, err = openLog(filepath.Join(c.dir, "wrappers.log")); err != nil {
		return nil, err
	}
	if d.faults, err = openLog(filepath.Join(c.dir, "faults.log")); err != nil {
		return nil, err
	}
	switch c.store {
	case "file":
		d.store = &fileFaults{d: d, path: filepath.Join(strings.TrimPrefix(c.url, "file://"), c.name+".lock")}
	case "redis":
		d.store, err = newRedisFaults(ctx, d)
	case "azurite":
		d.store, err = newAzuriteFaults(d)
	case "postgres":
		d.store, err = newPgFaults(d)
	case "mysql":
		d.store, err = newMyFaults(d)
	case "etcd":
		d.store, err = newEtcdFaults(d)
	case "kubernetes":
		d.store, err = newKubeFaults(d)
	case "s3":
		d.store, err = newS3Faults(d)
	case "gcs":
		d.store, err = newGCSFaults(d)
	default:
		err = fmt.Errorf("unknown store %q", c.store)
	}
	if err != nil {
		return nil, err
	}
	meta := map[string]any{
		"store": c.store, "name": c.name, "contenders": c.contenders, "duration": c.duration.String(),
		"ttl_ns": int64(c.ttl), "seed": c.seed, "slots": c.slots, "leaderrun_flags": c.extra, "start": now(),
	}
	b, _ := json.MarshalIndent(meta, "", "  ")
	return d, os.WriteFile(filepath.Join(c.dir, "meta.json"), b, 0o644)
}

func (d *driver) close() { d.store.close() }

func (d *driver) fault(kind string, extra map[string]any) { d.faultAt(now(), kind, extra) }

// change makes a change to the lease's record (a delete, an edit, a
// break) with fn and logs it as a fault lasting from the call to its
// answer (phases begin and done): the change takes effect somewhere in
// between, and not always soon after the call (Azure's break once 1.5 s
// after it; kubectl, starting on a loaded machine, once deleted the Lease
// more than a second after it began, and a slot taken meanwhile was lost).
func (d *driver) change(kind string, fn func() error) error {
	return d.changeTokens(kind, func() ([]uint64, error) { return nil, fn() })
}

// changeTokens is change for a change that tells the fencing tokens of the
// leases it removed: its done record carries them, so the check knows
// whose lease was lost (a holder that acquired before the change, even if
// its child started after it).
func (d *driver) changeTokens(kind string, fn func() ([]uint64, error)) error {
	d.fault(kind, map[string]any{"phase": "begin"})
	tokens, err := fn()
	done := map[string]any{"phase": "done"}
	if len(tokens) > 0 {
		done["tokens"] = tokens
	}
	d.fault(kind, done)
	return err
}

// faultAt logs a fault stamped t: taken before the signal is sent, logged
// once it was (a signal to a process that just exited is no fault).
func (d *driver) faultAt(t int64, kind string, extra map[string]any) {
	rec := map[string]any{"ev": "fault", "kind": kind, "t": t}
	for k, v := range extra {
		rec[k] = v
	}
	d.faults.write(rec)
}

func (d *driver) run(ctx context.Context, rng *rand.Rand) error {
	faultCtx, cancel := context.WithTimeout(ctx, d.c.duration)
	defer cancel()
	// A run that hangs (a fault that never returns, a wrapper that never
	// exits) must end with its reason, not silence until CI's limit.
	dog := time.AfterFunc(d.c.duration+stuckAfter, d.stuck)
	defer dog.Stop()
	var wg sync.WaitGroup
	for i := range d.c.contenders {
		wg.Go(func() { d.contender(faultCtx, i) })
	}
	d.inject(faultCtx, rng)
	// Shutdown: resume whatever we paused, then stop every wrapper (TERM,
	// which leaderrun forwards to its child; SIGKILL after 20 s).
	d.store.close()
	d.mu.Lock()
	for pid, p := range d.running {
		if d.stopped[pid] {
			_ = p.Signal(syscall.SIGCONT)
		}
		_ = p.Signal(syscall.SIGTERM)
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		d.mu.Lock()
		for _, p := range d.running {
			_ = p.Signal(syscall.SIGCONT)
			_ = p.Kill()
		}
		d.mu.Unlock()
		<-done
	}
	d.fault("end", nil)
	return nil
}

// stuckAfter is how long past its faults' duration a run may take to stop:
// a fault's own bound (a server restart waits up to about 20 s), the 20 s
// before the wrappers are SIGKILLed, and room for a loaded machine.
const stuckAfter = 2 * time.Minute

// stuck prints every goroutine's stack and the state of each wrapper still
// running, then ends the driver with status 3.
func (d *driver) stuck() {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	fmt.Fprintf(os.Stderr, "chaosrun: still running %v after the faults ended; goroutines:\n%s\n", stuckAfter, buf)
	if d.mu.TryLock() { // a goroutine stuck holding it must not hide the rest
		for pid := range d.running {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			fmt.Fprintf(os.Stderr, "chaosrun: wrapper %d (stopped by us: %v): %s\n", pid, d.stopped[pid], strings.TrimSpace(string(st)))
		}
		d.mu.Unlock()
	}
	os.Exit(3)
}

// contender runs leaderrun in a loop until ctx is done.
func (d *driver) contender(ctx context.Context, i int) {
	errLog, err := os.OpenFile(filepath.Join(d.c.dir, fmt.Sprintf("leaderrun-%02d.log", i)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaosrun:", err)
		return
	}
	defer errLog.Close()
	self, _ := os.Executable()
	for ctx.Err() == nil {
		args := append([]string{"--store", d.c.url, "--name", d.c.name, "--ttl", d.c.ttl.String(), "--holder", fmt.Sprintf("c%02d", i)}, d.c.extra...)
		args = append(args, "--", self, "child")
		cmd := exec.Command(d.c.leaderrun, args...)
		cmd.Env = append(os.Environ(), "CHAOS_DIR="+d.c.dir, fmt.Sprintf("CHAOS_CONTENDER=c%02d", i), "CHAOS_TTL="+d.c.ttl.String())
		cmd.Stdout, cmd.Stderr = nil, errLog
		// If the driver dies, its wrappers die (and theirs children with them);
		// a terminal's Ctrl-C reaches the driver only, which stops them itself.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		d.mu.Lock()
		if ctx.Err() != nil {
			d.mu.Unlock()
			return
		}
		t0 := now() // before the fork: nothing this leaderrun does comes earlier
		if err := cmd.Start(); err != nil {
			d.mu.Unlock()
			fmt.Fprintln(os.Stderr, "chaosrun: start leaderrun:", err)
			time.Sleep(time.Second)
			continue
		}
		pid := cmd.Process.Pid
		d.running[pid] = cmd.Process
		d.wrappers.write(map[string]any{"ev": "wrap_start", "t": now(), "t0": t0, "pid": pid, "contender": fmt.Sprintf("c%02d", i)})
		d.mu.Unlock()
		_ = cmd.Wait()
		t := now()
		d.mu.Lock()
		delete(d.running, pid)
		delete(d.stopped, pid)
		d.mu.Unlock()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		rec := map[string]any{"ev": "wrap_exit", "t": t, "pid": pid, "code": ws.ExitStatus()}
		if ws.Signaled() {
			rec["signal"] = ws.Signal().String()
		}
		d.wrappers.write(rec)
		if ws.ExitStatus() == 125 {
			time.Sleep(200 * time.Millisecond) // store down and --wait spent: do not spin
		}
	}
}

// holder returns the wrapper PID of the current holder, if it is one of
// our running wrappers (so a reused PID is never signalled).
func (d *driver) holder() (int, *os.Process) {
	b, err := os.ReadFile(filepath.Join(d.c.dir, "current"))
	if err != nil {
		return 0, nil
	}
	var wrapper, childPID int
	if _, err := fmt.Sscan(string(b), &wrapper, &childPID); err != nil {
		return 0, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.running[wrapper]; p != nil && !d.stopped[wrapper] {
		return wrapper, p
	}
	return 0, nil
}

// anyWrapper returns a random running wrapper that is not paused.
func (d *driver) anyWrapper(rng *rand.Rand) (int, *os.Process) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var pids []int
	for pid := range d.running {
		if !d.stopped[pid] {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return 0, nil
	}
	pid := pids[rng.IntN(len(pids))]
	return pid, d.running[pid]
}

func sleepCtx(ctx context.Context, dur time.Duration) {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// inject runs one fault at a time, with a random gap, until ctx is done.
func (d *driver) inject(ctx context.Context, rng *rand.Rand) {
	kinds := append([]string{"holder_sigkill", "holder_pause_short", "holder_pause_long", "waiter_sigkill"}, d.store.kinds()...)
	sleepCtx(ctx, 2*time.Second) // let the first holder start
	for ctx.Err() == nil {
		kind := kinds[rng.IntN(len(kinds))]
		var err error
		switch kind {
		case "holder_sigkill", "waiter_sigkill":
			err = d.kill(ctx, kind, rng)
		case "holder_pause_short":
			// Harmless by design: shorter than the lease can run out.
			err = d.pause(ctx, kind, time.Duration(100+rng.IntN(400))*time.Millisecond)
		case "holder_pause_long":
			// Longer than the TTL: a documented cause of overlap on stores
			// whose leases expire. Only when it can end before the run does:
			// cut short, it might explain nothing that it caused.
			dur := d.c.ttl + time.Duration(500+rng.IntN(2500))*time.Millisecond
			if end, ok := ctx.Deadline(); ok && time.Until(end) < dur {
				break
			}
			err = d.pause(ctx, kind, dur)
		default:
			err = d.store.inject(ctx, kind, rng)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaosrun: fault %s: %v\n", kind, err)
		}
		sleepCtx(ctx, time.Duration(500+rng.IntN(2500))*time.Millisecond)
	}
}

// waitHolder waits up to 3 s for a holder to be running.
func (d *driver) waitHolder(ctx context.Context) (int, *os.Process) {
	for range 30 {
		if pid, p := d.holder(); p != nil {
			return pid, p
		}
		sleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
	}
	return 0, nil
}

func (d *driver) kill(ctx context.Context, kind string, rng *rand.Rand) error {
	var pid int
	var p *os.Process
	if kind == "holder_sigkill" {
		pid, p = d.waitHolder(ctx)
	} else {
		pid, p = d.anyWrapper(rng)
	}
	if p == nil {
		return nil // nobody to kill: no fault
	}
	t := now()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return nil // it exited meanwhile
	}
	d.faultAt(t, kind, map[string]any{"pid": pid})
	return nil
}

// pause SIGSTOPs the holder's leaderrun (not its child) for dur.
func (d *driver) pause(ctx context.Context, kind string, dur time.Duration) error {
	pid, p := d.waitHolder(ctx)
	if p == nil {
		return nil
	}
	d.mu.Lock()
	d.stopped[pid] = true
	d.mu.Unlock()
	t := now()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		d.mu.Lock()
		delete(d.stopped, pid)
		d.mu.Unlock()
		return nil // it exited meanwhile
	}
	d.faultAt(t, kind, map[string]any{"pid": pid, "phase": "stop", "planned_ns": int64(dur)})
	sleepCtx(ctx, dur) // cut short at the end of the run; the log has the real length
	err := p.Signal(syscall.SIGCONT)
	d.fault(kind, map[string]any{"pid": pid, "phase": "cont"})
	d.mu.Lock()
	delete(d.stopped, pid)
	d.mu.Unlock()
	return err
}

// ---- file store faults ----

type fileFaults struct {
	d    *driver
	path string
}

func (f *fileFaults) kinds() []string { return []string{"lockfile_replace", "lockfile_delete"} }
func (f *fileFaults) close()          {}

func (f *fileFaults) inject(_ context.Context, kind string, _ *rand.Rand) error {
	switch kind {
	case "lockfile_replace":
		// A new inode with the same content, as an editor or a config
		// management tool would write it.
		b, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		tmp := f.path + ".chaos"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		return f.d.change(kind, func() error { return os.Rename(tmp, f.path) })
	case "lockfile_delete":
		return f.d.change(kind, func() error { return os.Remove(f.path) })
	}
	return fmt.Errorf("unknown fault %s", kind)
}
