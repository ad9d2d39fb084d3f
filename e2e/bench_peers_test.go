package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// BenchmarkHandoverPeers measures a clean handover of leaderrun on Redis
// and on etcd beside that of `etcdctl lock` (etcd's own command-line lock,
// whose waiter watches its predecessor's key) on the same etcd server: one
// of each per round, so that all three see the same machine. Each is the
// time from the holder's child being told to exit (its stdin closed) to the
// waiter's child running. It reports the medians and their ratios to
// etcdctl's (scripts/bench.sh, section 2).
func BenchmarkHandoverPeers(b *testing.B) {
	redisEnv := redisStore.benchEnv(b)
	etcdEnv := etcdStore.benchEnv(b)
	etcdctl, err := exec.LookPath("etcdctl")
	if err != nil {
		b.Skip("etcdctl is not installed (Debian: etcd-client)")
	}
	endpoint := strings.TrimPrefix(os.Getenv(etcdStore.envVar), "etcd://")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	closeStdin := func(_ *exec.Cmd, stdin io.Closer) { stdin.Close() }
	var onRedis, onEtcd, peer []time.Duration
	for i := 0; i < b.N; i++ {
		onRedis = append(onRedis, takeover(b, redisEnv, nil, closeStdin, i))
		onEtcd = append(onEtcd, takeover(b, etcdEnv, nil, closeStdin, b.N+i))
		peer = append(peer, etcdctlHandover(b, etcdctl, endpoint, cli, i))
	}
	p50 := func(lat []time.Duration) float64 {
		lat = slices.Clone(lat)
		slices.Sort(lat)
		return float64(lat[len(lat)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(onRedis), "redis-ms-p50")
	b.ReportMetric(p50(onEtcd), "etcd-ms-p50")
	b.ReportMetric(p50(peer), "etcdctl-lock-ms-p50")
	b.ReportMetric(p50(onRedis)/p50(peer), "redis/etcdctl")
	b.ReportMetric(p50(onEtcd)/p50(peer), "etcd/etcdctl")
}

// etcdctlHandover is takeover with `etcdctl lock`: a holder whose command
// waits on a FIFO, a waiter whose command prints the time it started. The
// waiter is known to wait once its key is under the lock's prefix beside
// the holder's (etcdctl's lock keys are NAME/LEASE-ID).
func etcdctlHandover(b *testing.B, etcdctl, endpoint string, cli *clientv3.Client, i int) time.Duration {
	name := "peer-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
	// etcdctl gives its command no stdin: the holder's command waits on a
	// FIFO instead, and ends when it is opened and closed.
	fifo := filepath.Join(b.TempDir(), "end")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	holder := exec.Command(etcdctl, "--endpoints="+endpoint, "lock", name, "--", "sh", "-c", `echo ready; read x < "$0"`, fifo)
	out, _ := holder.StdoutPipe()
	herr := &lockedBuffer{}
	holder.Stderr = herr
	if err := holder.Start(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		b.Fatal(err)
	}
	waiter := exec.Command(etcdctl, "--endpoints="+endpoint, "lock", name, "--", "date", "+%s%N")
	wout, _ := waiter.StdoutPipe()
	werr := &lockedBuffer{}
	waiter.Stderr = werr
	if err := waiter.Start(); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if time.Now().After(deadline) {
			b.Fatalf("etcdctl lock's waiter not queued after 30 s: holder: %s; waiter: %s", herr.String(), werr.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := cli.Get(ctx, name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if r.Count >= 2 {
			break
		}
		time.Sleep(time.Millisecond) // polling etcd until the waiter's key is there
	}
	t0 := time.Now()
	end, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	end.Close()
	d := childStartedAfter(b, wout, t0, werr.String)
	_ = holder.Wait()
	_ = waiter.Wait()
	return d
}
