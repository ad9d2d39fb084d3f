package e2e

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// BenchmarkListenScrapers: does serving --listen slow the lease's
// renewals? leaderrun holds a lease on a Redis of its own, renewing every
// 100 ms, with --listen; its own /metrics histogram of renewal latencies is
// read over a quiet window, then over a window in which 200 requests a
// second (/metrics and /leader in turn, each on a new connection, as many
// scrapers would) hit the endpoint. Both windows last
// LEADERRUN_BENCH_WINDOW (default 20s). It reports the mean renewal
// latency and the share of renewals answered within 2.5 ms in each.
func BenchmarkListenScrapers(b *testing.B) {
	redisStore.benchEnv(b) // skip rule
	srv := leasetest.StartServer(b, b.TempDir(), "scripts/redis.sh", "single")
	window := 20 * time.Second
	if v := os.Getenv("LEADERRUN_BENCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	port := freePort(b)
	base := "http://127.0.0.1:" + port
	cmd := exec.Command(lrBin, "--store", "redis://"+srv["LEADERRUN_TEST_REDIS"], "--name", "scraped", "--renew-every", "100ms", "--listen", "127.0.0.1:"+port, "--", "sleep", "3600")
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/leader"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("leaderrun did not lead within 30s")
		}
	}
	b.ResetTimer()
	h0 := renewalHistogram(b, base)
	time.Sleep(window)
	h1 := renewalHistogram(b, base)
	sent := scrape(base, window, 200)
	h2 := renewalHistogram(b, base)
	b.StopTimer()
	quiet, scraped := h1.minus(h0), h2.minus(h1)
	b.ReportMetric(quiet.mean()*1000, "ms/renewal-quiet")
	b.ReportMetric(scraped.mean()*1000, "ms/renewal-scraped")
	b.ReportMetric(quiet.within("0.0025"), "share≤2.5ms-quiet")
	b.ReportMetric(scraped.within("0.0025"), "share≤2.5ms-scraped")
	b.ReportMetric(float64(sent)/window.Seconds(), "requests/s")
	b.ReportMetric(quiet.count, "renewals-quiet")
	b.ReportMetric(scraped.count, "renewals-scraped")
}

// histo is the renewal histogram read from /metrics: count, sum and the
// cumulative count of each bucket by its le.
type histo struct {
	count, sum float64
	le         map[string]float64
}

func (h histo) minus(o histo) histo {
	d := histo{count: h.count - o.count, sum: h.sum - o.sum, le: map[string]float64{}}
	for k, v := range h.le {
		d.le[k] = v - o.le[k]
	}
	return d
}

func (h histo) mean() float64 { return h.sum / max(h.count, 1) }

func (h histo) within(le string) float64 { return h.le[le] / max(h.count, 1) }

func renewalHistogram(b *testing.B, base string) histo {
	b.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	h := histo{le: map[string]float64{}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "leaderrun_renewal_duration_seconds") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		switch {
		case strings.HasPrefix(line, "leaderrun_renewal_duration_seconds_count"):
			h.count = v
		case strings.HasPrefix(line, "leaderrun_renewal_duration_seconds_sum"):
			h.sum = v
		default:
			if j := strings.Index(line, `le="`); j >= 0 {
				h.le[line[j+4:j+4+strings.IndexByte(line[j+4:], '"')]] = v
			}
		}
	}
	return h
}

// scrape sends rate requests a second to base for d, each on a new
// connection, alternating /metrics and /leader; it returns how many were
// answered.
func scrape(base string, d time.Duration, rate int) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		path := "/metrics"
		if i%2 == 1 {
			path = "/leader"
		}
		wg.Add(1)
		go func() { // waited for below
			defer wg.Done()
			c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := c.Get(base + path)
			if err != nil {
				return
			}
			resp.Body.Close()
			mu.Lock()
			answered++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return answered
}
