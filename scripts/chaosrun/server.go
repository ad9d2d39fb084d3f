package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// ---- servers started by a script (postgres.sh, mariadb.sh, versitygw.sh, fakegcs.sh) ----

// scriptServer is a store server that one of the scripts started in its
// DIR: its PID is in DIR/env, and "SCRIPT restart DIR" starts it again on
// its port over its data after a kill (and updates the PID in DIR/env).
type scriptServer struct {
	d      *driver
	dir    string // the script's DIR (env, pids, ...)
	script string // the script's path, for restarts
	proc   string // a word of the server's command line
	pidVar string // the variable of DIR/env that holds the PID
	tree   bool   // signal the PID's children too (PostgreSQL's backends)
	pid    int
	paused bool
}

// serverSpec names a server a script started, for newScriptServer.
type serverSpec struct {
	store, flag     string // the store's name in errors; the flag -FLAG-dir
	dir, script     string // the script's DIR; the script's path
	proc            string // a word of the server's command line
	pidVar          string // the variable of DIR/env that holds the PID
	addrVar, addrIs string // the one that holds its address, and what that is ("URL")
	tree            bool   // signal the PID's children too
}

// newScriptServer reads the PID of the server a script started from
// DIR/env, and returns the rest of DIR/env for the store's client (with
// the address in addrVar).
func newScriptServer(d *driver, sp serverSpec) (*scriptServer, map[string]string, error) {
	if sp.dir == "" {
		return nil, nil, fmt.Errorf("%s: -%s-dir is required", sp.store, sp.flag)
	}
	s := &scriptServer{d: d, dir: sp.dir, script: sp.script, proc: sp.proc, pidVar: sp.pidVar, tree: sp.tree}
	env, err := serverEnv(sp.dir)
	if err != nil {
		return nil, nil, err
	}
	s.pid, _ = strconv.Atoi(env[sp.pidVar])
	if s.pid == 0 || env[sp.addrVar] == "" {
		return nil, nil, fmt.Errorf("%s: no %s or PID in %s/env", sp.store, sp.addrIs, sp.dir)
	}
	return s, env, nil
}

// signal sends sig to the server (to its children too when tree is set).
func (s *scriptServer) signal(sig syscall.Signal) {
	if s.tree {
		signalTree(s.pid, sig)
		return
	}
	_ = syscall.Kill(s.pid, sig)
}

// gone reports an error when the PID is no longer the server's.
func (s *scriptServer) gone() error {
	if !cmdlineHas(s.pid, s.proc) {
		return fmt.Errorf("%s pid %d is gone", s.proc, s.pid)
	}
	return nil
}

func (s *scriptServer) close() {
	if s.paused {
		s.signal(syscall.SIGCONT)
		s.paused = false
	}
}

// pause SIGSTOPs the server for 300 ms plus up to two TTLs, logging stop
// and cont.
func (s *scriptServer) pause(ctx context.Context, kind string, rng *rand.Rand) error {
	if err := s.gone(); err != nil {
		return err
	}
	dur := time.Duration(300+rng.IntN(int(2*s.d.c.ttl/time.Millisecond))) * time.Millisecond
	s.d.fault(kind, map[string]any{"pid": s.pid, "phase": "stop", "planned_ns": int64(dur)})
	s.paused = true
	s.signal(syscall.SIGSTOP)
	sleepCtx(ctx, dur)
	s.signal(syscall.SIGCONT)
	s.paused = false
	s.d.fault(kind, map[string]any{"pid": s.pid, "phase": "cont"})
	return nil
}

// restart SIGKILLs the server, as a crash, waits up to 1.5 s, and starts
// it again over its data with the script.
func (s *scriptServer) restart(kind string, rng *rand.Rand) error {
	if err := s.gone(); err != nil {
		return err
	}
	down := time.Duration(rng.IntN(1500)) * time.Millisecond
	s.d.fault(kind, map[string]any{"pid": s.pid, "phase": "kill", "down_ns": int64(down)})
	s.signal(syscall.SIGKILL)
	if err := waitGone(s.pid); err != nil {
		return err
	}
	time.Sleep(down)
	out, err := exec.Command(s.script, "restart", s.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s restart: %w: %s", filepath.Base(s.script), err, out)
	}
	env, err := serverEnv(s.dir)
	if err != nil {
		return err
	}
	if s.pid, _ = strconv.Atoi(env[s.pidVar]); s.pid == 0 {
		return fmt.Errorf("%s restart left no %s in %s/env", filepath.Base(s.script), s.pidVar, s.dir)
	}
	s.d.fault(kind, map[string]any{"pid": s.pid, "phase": "up"})
	return nil
}

// serverFaults are the faults of a store whose server a script started:
// the server paused, or killed and restarted over its data; and the
// faults keyKinds on the lease's own record (key_delete, key_edit), which
// key injects.
type serverFaults struct {
	*scriptServer
	keyKinds []string
	key      func(ctx context.Context, kind string) error
	release  func() // releases the store's client, if any
}

func (f *serverFaults) kinds() []string {
	return append([]string{"store_pause", "store_restart_persist"}, f.keyKinds...)
}

func (f *serverFaults) close() {
	f.scriptServer.close()
	if f.release != nil {
		f.release()
	}
}

func (f *serverFaults) inject(ctx context.Context, kind string, rng *rand.Rand) error {
	switch {
	case kind == "store_pause":
		return f.pause(ctx, kind, rng)
	case kind == "store_restart_persist":
		return f.restart(kind, rng)
	case slices.Contains(f.keyKinds, kind):
		return f.key(ctx, kind)
	}
	return fmt.Errorf("unknown fault %s", kind)
}
