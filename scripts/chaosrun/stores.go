package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/redis/go-redis/v9"
)

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

// cmdlineHas reports whether /proc/PID/cmdline contains word: a PID is
// signalled only while it is still the server we started.
func cmdlineHas(pid int, word string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), word)
}

// waitGone waits up to 10 s for pid to be gone.
func waitGone(pid int) error { return waitGoneFor(pid, 10*time.Second) }

func waitGoneFor(pid int, d time.Duration) error {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) {
			return nil
		}
	}
	return fmt.Errorf("pid %d still alive", pid)
}

// serverPause SIGSTOPs a store server for dur, logging stop and cont.
func serverPause(ctx context.Context, d *driver, pid int, dur time.Duration) error {
	d.fault("store_pause", map[string]any{"pid": pid, "phase": "stop", "planned_ns": int64(dur)})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	sleepCtx(ctx, dur) // cut short at the end of the run; the log has the real length
	err := syscall.Kill(pid, syscall.SIGCONT)
	d.fault("store_pause", map[string]any{"pid": pid, "phase": "cont"})
	return err
}

// ---- Redis ----

type redisFaults struct {
	d       *driver
	client  *redis.Client
	pid     int
	dataDir string // the server's --dir (redis.sh's DIR/single-PORT)
	paused  bool
}

func newRedisFaults(ctx context.Context, d *driver) (*redisFaults, error) {
	c := d.c
	if c.redisPort == 0 || c.redisPID == 0 || c.redisDir == "" {
		return nil, fmt.Errorf("redis: -redis-port, -redis-pid and -redis-dir are required")
	}
	r := &redisFaults{
		d:       d,
		client:  redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", c.redisPort), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second}),
		pid:     c.redisPID,
		dataDir: filepath.Join(c.redisDir, fmt.Sprintf("single-%d", c.redisPort)),
	}
	// From now on every write is in the append-only file (fsync always), so
	// a restart "with persistence" loses nothing.
	if err := r.client.ConfigSet(ctx, "appendfsync", "always").Err(); err != nil {
		return nil, err
	}
	if err := r.client.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		return nil, err
	}
	if err := r.awaitAOF(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// awaitAOF waits until the append-only file is complete (no rewrite running).
func (r *redisFaults) awaitAOF(ctx context.Context) error {
	for range 200 {
		info, err := r.client.Info(ctx, "persistence").Result()
		if err == nil && strings.Contains(info, "aof_enabled:1") &&
			strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis: the append-only file was not ready in 10 s")
}

func (r *redisFaults) kinds() []string {
	return []string{"store_pause", "store_restart_persist", "store_restart_empty", "key_delete"}
}

func (r *redisFaults) close() {
	if r.paused {
		_ = syscall.Kill(r.pid, syscall.SIGCONT)
		r.paused = false
	}
}

func (r *redisFaults) inject(ctx context.Context, kind string, rng *rand.Rand) error {
	switch kind {
	case "store_pause":
		if !cmdlineHas(r.pid, "redis-server") {
			return fmt.Errorf("redis pid %d is gone", r.pid)
		}
		r.paused = true
		defer func() { r.paused = false }()
		return serverPause(ctx, r.d, r.pid, time.Duration(300+rng.IntN(int(2*r.d.c.ttl/time.Millisecond)))*time.Millisecond)
	case "key_delete":
		return r.d.changeTokens(kind, func() ([]uint64, error) {
			v, err := r.client.GetDel(ctx, "leaderrun:{"+r.d.c.name+"}").Result()
			if errors.Is(err, redis.Nil) {
				return nil, nil
			}
			var rec struct {
				Token uint64 `json:"token"`
			}
			if err == nil && json.Unmarshal([]byte(v), &rec) == nil && rec.Token != 0 {
				return []uint64{rec.Token}, nil
			}
			return nil, err
		})
	case "store_restart_persist", "store_restart_empty":
		return r.restart(ctx, kind, time.Duration(rng.IntN(1500))*time.Millisecond)
	}
	return fmt.Errorf("unknown fault %s", kind)
}

// restart SIGKILLs the server, waits down, and starts a new one on the same
// port and directory: with its append-only file, or with none (empty).
func (r *redisFaults) restart(ctx context.Context, kind string, down time.Duration) error {
	if !cmdlineHas(r.pid, "redis-server") {
		return fmt.Errorf("redis pid %d is gone", r.pid)
	}
	if kind == "store_restart_persist" {
		if err := r.awaitAOF(ctx); err != nil {
			return err
		}
	}
	r.d.fault(kind, map[string]any{"pid": r.pid, "phase": "kill", "down_ns": int64(down)})
	if err := syscall.Kill(r.pid, syscall.SIGKILL); err != nil {
		return err
	}
	if err := waitGone(r.pid); err != nil {
		return err
	}
	if kind == "store_restart_empty" {
		_ = os.RemoveAll(filepath.Join(r.dataDir, "appendonlydir"))
		_ = os.Remove(filepath.Join(r.dataDir, "dump.rdb"))
	}
	time.Sleep(down)
	pidfile := filepath.Join(r.dataDir, "redis.pid")
	_ = os.Remove(pidfile)
	out, err := exec.Command("redis-server", "--port", strconv.Itoa(r.d.c.redisPort), "--bind", "127.0.0.1",
		"--protected-mode", "yes", "--daemonize", "yes", "--pidfile", pidfile,
		"--logfile", filepath.Join(r.dataDir, "redis.log"), "--dir", r.dataDir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always").CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-server: %v: %s", err, out)
	}
	for range 250 {
		if b, err := os.ReadFile(pidfile); err == nil && len(b) > 0 {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				r.pid = pid
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	// redis.sh stop DIR stops every PID listed in DIR/pids.
	if f, err := os.OpenFile(filepath.Join(r.d.c.redisDir, "pids"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fmt.Fprintln(f, r.pid)
		f.Close()
	}
	for range 250 {
		if r.client.Ping(ctx).Err() == nil {
			r.d.fault(kind, map[string]any{"pid": r.pid, "phase": "up"})
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("restarted redis-server does not answer")
}

// ---- Azurite ----

const (
	devAccount = "devstoreaccount1"
	devKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

type azuriteFaults struct {
	d        *driver
	pid      int
	port     string
	location string // --location of the server (persistent mode)
	blob     *azlease.BlobClient
	proc     *exec.Cmd // the server we restarted, if any
	paused   bool
}

func newAzuriteFaults(d *driver) (*azuriteFaults, error) {
	env, err := os.ReadFile(filepath.Join(d.c.azuriteDir, "env"))
	if err != nil {
		return nil, err
	}
	a := &azuriteFaults{d: d, location: os.Getenv("AZURITE_LOCATION")}
	sc := bufio.NewScanner(strings.NewReader(string(env)))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "LEADERRUN_TEST_AZURITE_PID":
			a.pid, _ = strconv.Atoi(v)
		case "LEADERRUN_TEST_AZURITE":
			u, err := url.Parse(v)
			if err != nil {
				return nil, err
			}
			a.port = u.Port()
		}
	}
	if a.pid == 0 || a.port == "" || d.c.azuriteBin == "" {
		return nil, fmt.Errorf("azurite: no PID or port in %s/env, or no -azurite-bin", d.c.azuriteDir)
	}
	// The lease's blob: the container is the store URL's last path element.
	u, err := url.Parse(strings.TrimPrefix(d.c.url, "azblob+"))
	if err != nil {
		return nil, err
	}
	cont := filepath.Base(u.Path)
	cred, err := container.NewSharedKeyCredential(devAccount, devKey)
	if err != nil {
		return nil, err
	}
	cc, err := container.NewClientWithSharedKeyCredential(fmt.Sprintf("http://127.0.0.1:%s/%s/%s", a.port, devAccount, cont), cred, nil)
	if err != nil {
		return nil, err
	}
	a.blob, err = azlease.NewBlobClient(cc.NewBlobClient(d.c.name+".lease"), nil)
	return a, err
}

func (a *azuriteFaults) kinds() []string {
	k := []string{"store_pause", "store_restart_empty", "lease_break"}
	if a.location != "" {
		k = append(k, "store_restart_persist")
	}
	return k
}

func (a *azuriteFaults) close() {
	if a.paused {
		_ = syscall.Kill(a.pid, syscall.SIGCONT)
		a.paused = false
	}
}

func (a *azuriteFaults) inject(ctx context.Context, kind string, rng *rand.Rand) error {
	switch kind {
	case "store_pause":
		if !cmdlineHas(a.pid, "azurite") {
			return fmt.Errorf("azurite pid %d is gone", a.pid)
		}
		a.paused = true
		defer func() { a.paused = false }()
		return serverPause(ctx, a.d, a.pid, time.Duration(500+rng.IntN(int(2*a.d.c.ttl/time.Millisecond)))*time.Millisecond)
	case "lease_break":
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// The break takes effect somewhere between the call and its answer
		// (on a loaded machine, once 1.5 s after the call).
		zero := int32(0)
		return a.d.change(kind, func() error {
			_, err := a.blob.BreakLease(cctx, &azlease.BlobBreakOptions{BreakPeriod: &zero})
			return err
		})
	case "store_restart_persist", "store_restart_empty":
		return a.restart(ctx, kind, time.Duration(rng.IntN(1500))*time.Millisecond)
	}
	return fmt.Errorf("unknown fault %s", kind)
}

// restart stops Azurite (SIGTERM when its data is to be kept, so it writes
// its database out; SIGKILL otherwise, and the data is wiped) and starts a
// new one on the same port.
func (a *azuriteFaults) restart(ctx context.Context, kind string, down time.Duration) error {
	if !cmdlineHas(a.pid, "azurite") {
		return fmt.Errorf("azurite pid %d is gone", a.pid)
	}
	sig := syscall.SIGKILL
	if kind == "store_restart_persist" {
		sig = syscall.SIGTERM
	}
	a.d.fault(kind, map[string]any{"pid": a.pid, "phase": "kill", "down_ns": int64(down), "signal": sig.String()})
	if err := syscall.Kill(a.pid, sig); err != nil {
		return err
	}
	// A clean shutdown writes the database out, but Azurite waits for its
	// clients' keep-alive connections to close: give it 3 s, then SIGKILL
	// (its database is autosaved every 5 s, so the last writes may be lost).
	if sig == syscall.SIGTERM && waitGoneFor(a.pid, 3*time.Second) != nil {
		a.d.fault(kind+"_sigkill", map[string]any{"pid": a.pid})
		_ = syscall.Kill(a.pid, syscall.SIGKILL)
	}
	if a.proc != nil {
		_ = a.proc.Wait()
		a.proc = nil
	} else if err := waitGone(a.pid); err != nil {
		return err
	}
	if kind == "store_restart_empty" && a.location != "" {
		entries, _ := os.ReadDir(a.location)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(a.location, e.Name()))
		}
	}
	time.Sleep(down)
	args := []string{"--blobHost", "127.0.0.1", "--blobPort", a.port, "--skipApiVersionCheck", "--loose", "--silent"}
	if a.location != "" {
		args = append(args, "--location", a.location)
	} else {
		args = append(args, "--inMemoryPersistence")
	}
	cmd := exec.Command(a.d.c.azuriteBin, args...)
	cmd.Env = append(os.Environ(), "AZURITE_SKIP_API_VERSION_CHECK=true")
	logf, err := os.OpenFile(filepath.Join(a.d.c.azuriteDir, "azurite.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	a.proc, a.pid = cmd, cmd.Process.Pid
	// azurite.sh stop DIR stops the PID in DIR/env.
	env := fmt.Sprintf("LEADERRUN_TEST_AZURITE=http://127.0.0.1:%s/%s\nLEADERRUN_TEST_AZURITE_PID=%d\n", a.port, devAccount, a.pid)
	if err := os.WriteFile(filepath.Join(a.d.c.azuriteDir, "env"), []byte(env), 0o644); err != nil {
		return err
	}
	hc := &http.Client{Timeout: time.Second}
	for range 300 {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%s/%s?comp=list", a.port, devAccount))
		if err == nil {
			resp.Body.Close()
			a.d.fault(kind, map[string]any{"pid": a.pid, "phase": "up"})
			return nil
		}
		if ctx.Err() != nil && !alive(a.pid) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("restarted azurite does not answer")
}

// serverEnv reads DIR/env, the variables a scripts/*.sh start wrote.
func serverEnv(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}
