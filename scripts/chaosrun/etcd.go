package main

import (
	"bytes"
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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ---- etcd ----

// etcdFaults injects faults into the three-member cluster scripts/etcd.sh
// started in c.etcdDir: one member frozen (SIGSTOP) or SIGKILLed and
// restarted with its data (the command line it ran with), and the lease key
// deleted. A cluster keeps its quorum through one member's fault, so none of
// these but the key deletion may cost a holder its lease.
type etcdFaults struct {
	d      *driver
	dir    string   // etcd.sh's DIR (env, pids)
	addrs  []string // member client addresses
	pids   []int    // the member at addrs[i]
	procs  []*exec.Cmd
	client *clientv3.Client
	paused int // PID of the frozen member, 0 when none
}

func newEtcdFaults(d *driver) (*etcdFaults, error) {
	e := &etcdFaults{d: d, dir: d.c.etcdDir}
	if e.dir == "" {
		return nil, fmt.Errorf("etcd: -etcd-dir is required")
	}
	env, err := serverEnv(e.dir)
	if err != nil {
		return nil, err
	}
	if v := env["LEADERRUN_TEST_ETCD_CLUSTER_ADDRS"]; v != "" {
		e.addrs = strings.Split(v, ",")
	}
	if v := env["LEADERRUN_TEST_ETCD_CLUSTER_PIDS"]; v != "" {
		for _, p := range strings.Split(v, ",") {
			pid, err := strconv.Atoi(p)
			if err != nil {
				return nil, fmt.Errorf("etcd: bad PID %q in %s/env", p, e.dir)
			}
			e.pids = append(e.pids, pid)
		}
	}
	if len(e.addrs) == 0 || len(e.addrs) != len(e.pids) {
		return nil, fmt.Errorf("etcd: no cluster addresses and PIDs in %s/env (start etcd.sh with the cluster topology)", e.dir)
	}
	e.procs = make([]*exec.Cmd, len(e.pids))
	e.client, err = clientv3.New(clientv3.Config{Endpoints: e.addrs, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	return e, err
}

func (e *etcdFaults) kinds() []string {
	return []string{"store_pause", "store_restart_persist", "key_delete"}
}

func (e *etcdFaults) close() {
	if e.paused != 0 {
		_ = syscall.Kill(e.paused, syscall.SIGCONT)
		e.paused = 0
	}
	if e.client != nil {
		_ = e.client.Close()
	}
}

func (e *etcdFaults) inject(ctx context.Context, kind string, rng *rand.Rand) error {
	i := rng.IntN(len(e.pids))
	switch kind {
	case "store_pause":
		if !cmdlineHas(e.pids[i], "etcd") {
			return fmt.Errorf("etcd member pid %d is gone", e.pids[i])
		}
		e.paused = e.pids[i]
		defer func() { e.paused = 0 }()
		return serverPause(ctx, e.d, e.pids[i], time.Duration(300+rng.IntN(int(2*e.d.c.ttl/time.Millisecond)))*time.Millisecond)
	case "key_delete":
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return e.d.changeTokens(kind, func() ([]uint64, error) {
			resp, err := e.client.Delete(cctx, "leaderrun/"+e.d.c.name, clientv3.WithPrevKV())
			if err != nil {
				return nil, err
			}
			var tokens []uint64 // a lease's token is its key's create revision
			for _, kv := range resp.PrevKvs {
				tokens = append(tokens, uint64(kv.CreateRevision))
			}
			return tokens, nil
		})
	case "store_restart_persist":
		return e.restart(ctx, kind, i, time.Duration(rng.IntN(1500))*time.Millisecond)
	}
	return fmt.Errorf("unknown fault %s", kind)
}

// restart SIGKILLs member i, waits down, and starts it again with the
// command line and directory it ran with (etcd keeps its data in its WAL,
// written before it answers), then waits until it answers.
func (e *etcdFaults) restart(ctx context.Context, kind string, i int, down time.Duration) error {
	pid := e.pids[i]
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(raw, []byte("etcd")) {
		return fmt.Errorf("etcd member pid %d is gone", pid)
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	e.d.fault(kind, map[string]any{"pid": pid, "phase": "kill", "down_ns": int64(down)})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	if p := e.procs[i]; p != nil {
		_ = p.Wait()
		e.procs[i] = nil
	} else if err := waitGone(pid); err != nil {
		return err
	}
	time.Sleep(down)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = cwd
	logf, err := os.OpenFile(filepath.Join(e.dir, fmt.Sprintf("restarted-%d.log", i)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.procs[i], e.pids[i] = cmd, cmd.Process.Pid
	// etcd.sh stop DIR stops every PID listed in DIR/pids.
	if f, err := os.OpenFile(filepath.Join(e.dir, "pids"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fmt.Fprintln(f, e.pids[i])
		f.Close()
	}
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{e.addrs[i]}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer one.Close()
	for range 200 {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := one.Get(cctx, "health")
		cancel()
		if err == nil {
			e.d.fault(kind, map[string]any{"pid": e.pids[i], "phase": "up"})
			return nil
		}
		if ctx.Err() != nil && !alive(e.pids[i]) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("restarted etcd member does not answer")
}
