package e2e

import (
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkFileHandover measures a clean handover on the file store: from
// the moment the leader's child is told to exit to the moment the waiting
// instance's child runs (its first action is to print the time). It includes
// the child's exit, leaderrun's group sweep and release, the waiter's wake-up
// and acquisition, and fork+exec of the next child.
func BenchmarkFileHandover(b *testing.B) {
	benchHandover(b, []string{"LEADERRUN_STORE=file://" + b.TempDir()})
}

func benchHandover(b *testing.B, env []string) {
	lat := benchTakeover(b, env, nil, func(_ *exec.Cmd, stdin io.Closer) {
		stdin.Close() // the leader's child reads EOF and exits
	})
	reportPercentiles(b, lat, "handover")
}

// benchTakeover runs b.N takeovers (takeover) and returns their times.
func benchTakeover(b *testing.B, env, args []string, end func(leader *exec.Cmd, stdin io.Closer)) []time.Duration {
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		lat = append(lat, takeover(b, env, args, end, i))
	}
	return lat
}

// takeover runs one takeover: a leader whose child waits on stdin, a
// waiter whose child prints the time it started, and end, which makes the
// leader go (closes its stdin, or kills it). It returns the time from end
// to the waiter's child running. args are extra leaderrun flags; i makes
// the lease's name unique.
func takeover(b *testing.B, env, args []string, end func(leader *exec.Cmd, stdin io.Closer), i int) time.Duration {
	name := "takeover-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
	lrArgs := append([]string{"--name", name}, args...)
	holder := exec.Command(lrBin, append(lrArgs, "--", "sh", "-c", "echo ready; read x")...)
	holder.Env = append(os.Environ(), env...)
	in, _ := holder.StdinPipe()
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		b.Fatal(err)
	}
	waiter := exec.Command(lrBin, append(lrArgs, "--", "date", "+%s%N")...)
	waiter.Env = append(os.Environ(), env...)
	wout, _ := waiter.StdoutPipe()
	werr := &lockedBuffer{}
	waiter.Stderr = werr
	if err := waiter.Start(); err != nil {
		b.Fatal(err)
	}
	for !strings.Contains(werr.String(), "waiting") {
		time.Sleep(time.Millisecond) // polling the waiter's stderr until it waits
	}
	t0 := time.Now()
	end(holder, in)
	d := childStartedAfter(b, wout, t0, werr.String)
	_ = holder.Wait()
	_ = waiter.Wait()
	return d
}

// childStartedAfter reads the time a waiter's child printed (date +%s%N)
// from out and returns how long after t0 that was.
func childStartedAfter(b *testing.B, out io.Reader, t0 time.Time, stderr func() string) time.Duration {
	line := make([]byte, 64)
	n, err := out.Read(line)
	if err != nil {
		b.Fatal(err, stderr())
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(line[:n])), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, ns).Sub(t0)
}

// reportPercentiles reports the p50 and p90 of lat in milliseconds.
func reportPercentiles(b *testing.B, lat []time.Duration, unit string) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, unit+"-ms-p50")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, unit+"-ms-p90")
}
