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
)

// ---- Kubernetes ----

// kubeFaults injects faults into the kube-apiserver scripts/kubernetes.sh
// started in c.kubeDir: the API server frozen (SIGSTOP) or SIGKILLed and
// restarted (its etcd keeps the data), and the Lease deleted or its
// holderIdentity edited with kubectl, as an operator could.
type kubeFaults struct {
	d          *driver
	dir        string // kubernetes.sh's DIR (env, pids)
	kubeconfig string
	pid        int // the API server
	proc       *exec.Cmd
	paused     int
}

func newKubeFaults(d *driver) (*kubeFaults, error) {
	k := &kubeFaults{d: d, dir: d.c.kubeDir}
	if k.dir == "" {
		return nil, fmt.Errorf("kubernetes: -kube-dir is required")
	}
	env, err := serverEnv(k.dir)
	if err != nil {
		return nil, err
	}
	k.kubeconfig = env["LEADERRUN_TEST_KUBECONFIG"]
	k.pid, _ = strconv.Atoi(env["LEADERRUN_TEST_KUBE_APISERVER_PID"])
	if k.kubeconfig == "" || k.pid == 0 {
		return nil, fmt.Errorf("kubernetes: no kubeconfig and API server PID in %s/env", k.dir)
	}
	return k, nil
}

func (k *kubeFaults) kinds() []string {
	return []string{"store_pause", "store_restart_persist", "key_delete", "key_edit"}
}

func (k *kubeFaults) close() {
	if k.paused != 0 {
		_ = syscall.Kill(k.paused, syscall.SIGCONT)
		k.paused = 0
	}
}

// kubectl runs kubectl on the API server, bounded by 5 s.
func (k *kubeFaults) kubectl(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "kubectl", append([]string{"--kubeconfig", k.kubeconfig, "--namespace", "default", "--request-timeout", "3s"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (k *kubeFaults) inject(ctx context.Context, kind string, rng *rand.Rand) error {
	switch kind {
	case "store_pause":
		if !cmdlineHas(k.pid, "kube-apiserver") {
			return fmt.Errorf("kube-apiserver pid %d is gone", k.pid)
		}
		k.paused = k.pid
		defer func() { k.paused = 0 }()
		return serverPause(ctx, k.d, k.pid, time.Duration(300+rng.IntN(int(2*k.d.c.ttl/time.Millisecond)))*time.Millisecond)
	case "key_delete":
		return k.d.change(kind, func() error { return k.kubectl(ctx, "delete", "lease", k.d.c.name, "--ignore-not-found") })
	case "key_edit":
		return k.d.change(kind, func() error {
			return k.kubectl(ctx, "patch", "lease", k.d.c.name, "--type", "merge", "-p", `{"spec":{"holderIdentity":"chaos-intruder"}}`)
		})
	case "store_restart_persist":
		return k.restart(ctx, kind, time.Duration(rng.IntN(1500))*time.Millisecond)
	}
	return fmt.Errorf("unknown fault %s", kind)
}

// restart SIGKILLs the API server, waits down, starts it again with the
// command line and directory it ran with, and waits until it is ready.
func (k *kubeFaults) restart(ctx context.Context, kind string, down time.Duration) error {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k.pid))
	if err != nil || !bytes.Contains(raw, []byte("kube-apiserver")) {
		return fmt.Errorf("kube-apiserver pid %d is gone", k.pid)
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", k.pid))
	k.d.fault(kind, map[string]any{"pid": k.pid, "phase": "kill", "down_ns": int64(down)})
	if err := syscall.Kill(k.pid, syscall.SIGKILL); err != nil {
		return err
	}
	if k.proc != nil {
		_ = k.proc.Wait()
		k.proc = nil
	} else if err := waitGone(k.pid); err != nil {
		return err
	}
	time.Sleep(down)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = cwd
	if logf, err := os.OpenFile(filepath.Join(k.dir, "restarted.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	k.proc, k.pid = cmd, cmd.Process.Pid
	// kubernetes.sh stop DIR stops every PID listed in DIR/pids.
	if f, err := os.OpenFile(filepath.Join(k.dir, "pids"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fmt.Fprintln(f, k.pid)
		f.Close()
	}
	for range 600 {
		if k.kubectl(ctx, "get", "--raw", "/readyz") == nil {
			k.d.fault(kind, map[string]any{"pid": k.pid, "phase": "up"})
			return nil
		}
		if ctx.Err() != nil || !alive(k.pid) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("restarted kube-apiserver is not ready")
}
