package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ---- PostgreSQL ----

// pgFaults injects faults into the server scripts/postgres.sh started in
// c.pgDir. The server is the postmaster and its children, each backend in
// a session of its own, so a pause or kill reaches each of them.
type pgFaults struct {
	d      *driver
	dir    string // postgres.sh's DIR (env, pids, rundir, port)
	url    string
	pid    int
	paused bool
}

func newPgFaults(d *driver) (*pgFaults, error) {
	p := &pgFaults{d: d, dir: d.c.pgDir}
	if p.dir == "" {
		return nil, fmt.Errorf("postgres: -pg-dir is required")
	}
	if err := p.readEnv(); err != nil {
		return nil, err
	}
	return p, nil
}

// readEnv reads the server's URL and PID from DIR/env.
func (p *pgFaults) readEnv() error {
	env, err := serverEnv(p.dir)
	if err != nil {
		return err
	}
	p.url = env["LEADERRUN_TEST_POSTGRES_URL"]
	p.pid, _ = strconv.Atoi(env["LEADERRUN_TEST_POSTGRES_PID"])
	if p.url == "" || p.pid == 0 {
		return fmt.Errorf("postgres: no URL or PID in %s/env", p.dir)
	}
	return nil
}

func (p *pgFaults) kinds() []string {
	return []string{"store_pause", "store_restart_persist", "key_delete"}
}

func (p *pgFaults) close() {
	if p.paused {
		signalTree(p.pid, syscall.SIGCONT)
		p.paused = false
	}
}

func (p *pgFaults) inject(ctx context.Context, kind string, rng *rand.Rand) error {
	switch kind {
	case "store_pause":
		if !cmdlineHas(p.pid, "postgres") {
			return fmt.Errorf("postgres pid %d is gone", p.pid)
		}
		dur := time.Duration(300+rng.IntN(int(2*p.d.c.ttl/time.Millisecond))) * time.Millisecond
		p.d.fault(kind, map[string]any{"pid": p.pid, "phase": "stop", "planned_ns": int64(dur)})
		p.paused = true
		signalTree(p.pid, syscall.SIGSTOP)
		sleepCtx(ctx, dur)
		signalTree(p.pid, syscall.SIGCONT)
		p.paused = false
		p.d.fault(kind, map[string]any{"pid": p.pid, "phase": "cont"})
		return nil
	case "key_delete":
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(cctx, p.url)
		if err != nil {
			return fmt.Errorf("connect: %v", err) // pgx's message holds no password
		}
		defer c.Close(context.Background())
		p.d.fault(kind, nil)
		_, err = c.Exec(cctx, "DELETE FROM leaderrun_leases WHERE name = $1", p.d.c.name)
		return err
	case "store_restart_persist":
		// SIGKILL, as a crash: every committed row survives (WAL replay).
		if !cmdlineHas(p.pid, "postgres") {
			return fmt.Errorf("postgres pid %d is gone", p.pid)
		}
		down := time.Duration(rng.IntN(1500)) * time.Millisecond
		p.d.fault(kind, map[string]any{"pid": p.pid, "phase": "kill", "down_ns": int64(down)})
		signalTree(p.pid, syscall.SIGKILL)
		if err := waitGone(p.pid); err != nil {
			return err
		}
		time.Sleep(down)
		out, err := exec.Command(filepath.Join(p.d.c.pgScripts, "postgres.sh"), "restart", p.dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("postgres.sh restart: %v: %s", err, out)
		}
		if err := p.readEnv(); err != nil {
			return err
		}
		p.d.fault(kind, map[string]any{"pid": p.pid, "phase": "up"})
		return nil
	}
	return fmt.Errorf("unknown fault %s", kind)
}

// signalTree sends sig to pid and its children, stopping pid first so it
// forks no new child meanwhile.
func signalTree(pid int, sig syscall.Signal) {
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+1:]); i >= 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			_ = syscall.Kill(n, sig)
		}
	}
	_ = syscall.Kill(pid, sig)
	if sig != syscall.SIGSTOP {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}
