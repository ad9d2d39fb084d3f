package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// requirePromtool returns promtool's path, failing the test without it
// with how to get it: Debian has no package of promtool alone, and
// installing prometheus starts a server, so scripts/test.sh extracts it
// into .tools/bin.
func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: run scripts/test.sh once (it extracts promtool from Debian's prometheus package into .tools/bin) and put .tools/bin on PATH, or `apt-get install --no-install-recommends prometheus` (which starts a Prometheus server)")
	}
	return p
}

// promCheck runs promtool check metrics on path's content.
func promCheck(t *testing.T, promtool, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics %s: %v\n%s", path, err, out)
	}
}

// sample returns the value of the sample whose line starts with prefix
// (metric name and labels), or "" when there is none.
func sample(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, prefix+" "); ok {
			return v
		}
	}
	return ""
}

func TestMetricsFile(t *testing.T) {
	promtool := requirePromtool(t)
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	path := filepath.Join(t.TempDir(), "job.prom")
	lbl := `{name="job",holder="web-1"}`
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if code, stderr := runLR(t, env, "--name", "job", "--holder", "web-1", "--metrics-file", path, "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	promCheck(t, promtool, path)
	ok := read()
	success := sample(ok, `leaderrun_last_success_timestamp_seconds{name="job"}`)
	for prefix, want := range map[string]string{
		"leaderrun_last_run_exit_code" + lbl:                                           "0",
		`leaderrun_last_run_outcome{name="job",holder="web-1",outcome="ok"}`:           "1",
		`leaderrun_last_run_outcome{name="job",holder="web-1",outcome="failed"}`:       "0",
		"leaderrun_last_run_end_timestamp_seconds" + lbl:                               success,
		"leaderrun_last_run_renewals_failed" + lbl:                                     "0",
		`leaderrun_last_run_outcome{name="job",holder="web-1",outcome="stepped-down"}`: "0",
	} {
		if got := sample(ok, prefix); got != want || got == "" {
			t.Errorf("%s = %q; want %q\n%s", prefix, got, want, ok)
		}
	}

	// A failed run replaces the file but keeps the last success.
	if code, _ := runLR(t, env, "--name", "job", "--holder", "web-1", "--metrics-file", path, "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("exit %d; want 3", code)
	}
	promCheck(t, promtool, path)
	failed := read()
	if got := sample(failed, "leaderrun_last_run_exit_code"+lbl); got != "3" {
		t.Errorf("exit code %q; want 3", got)
	}
	if got := sample(failed, `leaderrun_last_run_outcome{name="job",holder="web-1",outcome="failed"}`); got != "1" {
		t.Errorf("failed outcome %q; want 1", got)
	}
	if got := sample(failed, `leaderrun_last_success_timestamp_seconds{name="job"}`); got != success {
		t.Errorf("last success after a failure %q; want the earlier %q", got, success)
	}

	// A standby that found the lease held writes nothing: the file keeps
	// this host's last run.
	holder := start(t, env, "--name", "job", "--", "sh", "-c", "echo up; exec sleep 30")
	if l := holder.line(); l != "up" {
		t.Fatalf("holder printed %q", l)
	}
	before, _ := os.Stat(path)
	if code, stderr := runLR(t, env, "--name", "job", "--no-wait", "--metrics-file", path, "--", "true"); code != 75 {
		t.Fatalf("standby exit %d; want 75: %s", code, stderr)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) || read() != failed {
		t.Errorf("a standby that did not run replaced the metrics file")
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}

	// Bad input: a directory that does not exist is refused before anything runs.
	marker := filepath.Join(t.TempDir(), "ran")
	code, stderr := runLR(t, env, "--name", "other", "--metrics-file", "/nonexistent/dir/x.prom", "--", "touch", marker)
	if code != 125 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "/nonexistent/dir") {
		t.Errorf("missing directory: exit %d, %q; want 125 and one line", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the child ran despite a bad --metrics-file")
	}
}

// TestMetricsFileAtomic reads the metrics file in a tight loop while runs
// replace it: every read is a whole file.
func TestMetricsFileAtomic(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	path := filepath.Join(t.TempDir(), "job.prom")
	if code, stderr := runLR(t, env, "--name", "job", "--metrics-file", path, "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	stop := make(chan struct{})
	var reads, bad int
	var badText string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(path)
			reads++
			s := string(b)
			if err != nil || !strings.HasPrefix(s, "# HELP leaderrun_last_run_start_timestamp_seconds ") ||
				!strings.Contains(s, "\nleaderrun_last_success_timestamp_seconds{name=\"job\"} ") || !strings.HasSuffix(s, "\n") {
				bad++
				badText = fmt.Sprint(err, s)
			}
		}
	}()
	const runs = 40
	for i := range runs {
		// Alternate: a failed run's file differs, and keeps the last success.
		if code, stderr := runLR(t, env, "--name", "job", "--metrics-file", path, "--", "sh", "-c", fmt.Sprintf("exit %d", i%2)); code != i%2 {
			t.Fatalf("run %d: exit %d: %s", i, code, stderr)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads during %d replacements", reads, runs)
	if bad > 0 {
		t.Fatalf("%d of %d reads saw a partial file, such as %q", bad, reads, badText)
	}
}

// pingServer is an HTTP server on 127.0.0.1 that records the pings.
type pingServer struct {
	url  string // with the secret key as its path
	key  string
	mu   sync.Mutex
	reqs []pingReq
	got  chan struct{} // one value per request
	hang chan struct{} // when not nil, requests wait for it to close
}

type pingReq struct{ method, path, rid, body string }

func newPingServer(t *testing.T, hang bool) *pingServer {
	t.Helper()
	s := &pingServer{key: "0b9d1e7c-5f8a-4c3e-9d2b-7a61c4e8f0a3", got: make(chan struct{}, 100)}
	if hang {
		s.hang = make(chan struct{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	go srv.Serve(ln)
	t.Cleanup(func() {
		if s.hang != nil {
			close(s.hang)
		}
		srv.Close()
	})
	s.url = "http://" + ln.Addr().String() + "/" + s.key
	return s
}

func (s *pingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, pingReq{r.Method, r.URL.Path, r.URL.Query().Get("rid"), string(body)})
	s.mu.Unlock()
	s.got <- struct{}{}
	if s.hang != nil {
		<-s.hang
	}
	fmt.Fprintln(w, "OK")
}

// paths returns the paths requested so far, the key replaced by KEY, and
// checks that they all carry the same run id, a UUID.
func (s *pingServer) paths(t *testing.T) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, r := range s.reqs {
		out = append(out, strings.Replace(r.path, s.key, "KEY", 1))
		if r.method != http.MethodPost || !uuid.MatchString(r.rid) || r.rid != s.reqs[0].rid {
			t.Errorf("request %s %s rid %q: want POST with the run's one UUID", r.method, r.path, r.rid)
		}
	}
	return out
}

// noKey fails if the ping URL's key appears in any of outs.
func noKey(t *testing.T, key string, outs ...string) {
	t.Helper()
	for _, o := range outs {
		if strings.Contains(o, key) {
			t.Errorf("the ping key appears in the output: %q", o)
		}
	}
}

func TestPing(t *testing.T) {
	dir := t.TempDir()
	env := []string{"LEADERRUN_STORE=file://" + dir}
	for _, c := range []struct {
		name  string
		code  int
		args  []string
		paths []string
	}{
		{"ok", 0, []string{"--", "true"}, []string{"/KEY/start", "/KEY"}},
		{"failed", 3, []string{"--", "sh", "-c", "exit 3"}, []string{"/KEY/start", "/KEY/3"}},
		{"signal", 143, []string{"--", "sh", "-c", "kill -TERM $$"}, []string{"/KEY/start", "/KEY/143"}},
		{"stepped-down", 123, []string{"--health-cmd", "false", "--health-interval", "100ms", "--health-timeout", "100ms", "--health-retries", "1", "--", "sleep", "30"}, []string{"/KEY/start", "/KEY/123"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newPingServer(t, false)
			code, stderr := runLR(t, env, append([]string{"--name", "p-" + c.name, "-v", "--ping", s.url}, c.args...)...)
			if code != c.code {
				t.Fatalf("exit %d; want %d: %s", code, c.code, stderr)
			}
			if got := s.paths(t); strings.Join(got, " ") != strings.Join(c.paths, " ") {
				t.Errorf("pings %v; want %v", got, c.paths)
			}
			s.mu.Lock()
			end := s.reqs[len(s.reqs)-1].body
			s.mu.Unlock()
			if !strings.Contains(end, "lease p-"+c.name) || !strings.Contains(end, "outcome "+c.name) && c.name != "signal" || strings.Contains(end, "\n") {
				t.Errorf("end ping's body %q: want one line with the lease and the outcome", end)
			}
			noKey(t, s.key, stderr)
		})
	}

	// The child gets neither variable: a leaderrun it starts must not ping
	// the same check or write the same file.
	t.Run("child environment", func(t *testing.T) {
		s := newPingServer(t, false)
		prom := filepath.Join(t.TempDir(), "env.prom")
		p := start(t, append(env, "LEADERRUN_PING="+s.url, "LEADERRUN_METRICS_FILE="+prom), "--name", "p-env", "--",
			"sh", "-c", `echo "${LEADERRUN_PING-unset} ${LEADERRUN_METRICS_FILE-unset}"`)
		if l := p.line(); l != "unset unset" {
			t.Errorf("the child saw %q; want neither variable", l)
		}
		if code := p.wait(); code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr.String())
		}
		if got := s.paths(t); strings.Join(got, " ") != "/KEY/start /KEY" {
			t.Errorf("pings %v from the variable; want start then success", got)
		}
		if _, err := os.Stat(prom); err != nil {
			t.Errorf("LEADERRUN_METRICS_FILE: %v", err)
		}
	})

	// leaderrun told to stop (systemctl stop, Ctrl-C) passes the signal on
	// and still pings the end.
	t.Run("stopped", func(t *testing.T) {
		s := newPingServer(t, false)
		p := start(t, env, "--name", "p-stop", "--ping", s.url, "--", "sh", "-c", "echo up; exec sleep 30")
		if l := p.line(); l != "up" {
			t.Fatalf("child printed %q", l)
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(); code != 143 {
			t.Fatalf("exit %d; want 143: %s", code, p.stderr.String())
		}
		if got := s.paths(t); strings.Join(got, " ") != "/KEY/start /KEY/143" {
			t.Errorf("pings %v; want start then 143", got)
		}
	})

	t.Run("lost", func(t *testing.T) {
		s := newPingServer(t, false)
		p := start(t, env, "--name", "p-lost", "--ping", s.url, "--", "sh", "-c", "echo up; exec sleep 30")
		if l := p.line(); l != "up" {
			t.Fatalf("child printed %q", l)
		}
		path := filepath.Join(dir, "p-lost.lock")
		if err := os.WriteFile(path+".new", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(); code != 124 {
			t.Fatalf("exit %d; want 124: %s", code, p.stderr.String())
		}
		if got := s.paths(t); strings.Join(got, " ") != "/KEY/start /KEY/124" {
			t.Errorf("pings %v; want start then 124", got)
		}
		noKey(t, s.key, p.stderr.String())
	})

	t.Run("skipped", func(t *testing.T) {
		s := newPingServer(t, false)
		holder := start(t, env, "--name", "p-skip", "--", "sh", "-c", "echo up; exec sleep 30")
		if l := holder.line(); l != "up" {
			t.Fatalf("holder printed %q", l)
		}
		// Without --ping-skipped an instance that did not run is silent...
		if code, stderr := runLR(t, env, "--name", "p-skip", "--no-wait", "--ping", s.url, "--", "true"); code != 75 {
			t.Fatalf("exit %d; want 75: %s", code, stderr)
		}
		if got := s.paths(t); len(got) != 0 {
			t.Errorf("a standby pinged %v without --ping-skipped", got)
		}
		// ...with it, it logs the skip.
		code, stderr := runLR(t, env, "--name", "p-skip", "--no-wait", "--ping", s.url, "--ping-skipped", "--", "true")
		if code != 75 {
			t.Fatalf("exit %d; want 75: %s", code, stderr)
		}
		if got := s.paths(t); strings.Join(got, " ") != "/KEY/log" {
			t.Errorf("pings %v; want /KEY/log", got)
		}
		noKey(t, s.key, stderr)
	})

	t.Run("once-per done", func(t *testing.T) {
		// A tick that finds its --once-per period done did not run: silent,
		// or /log with --ping-skipped, as for a held lease.
		if code, stderr := runLR(t, env, "--name", "p-once", "--once-per", "week", "--", "true"); code != 0 {
			t.Fatalf("first run: exit %d: %s", code, stderr)
		}
		s := newPingServer(t, false)
		if code, stderr := runLR(t, env, "--name", "p-once", "--once-per", "week", "--ping", s.url, "--", "true"); code != 0 || !strings.Contains(stderr, "already done") {
			t.Fatalf("second run: exit %d; want 0, already done: %s", code, stderr)
		}
		if got := s.paths(t); len(got) != 0 {
			t.Errorf("a tick not needed pinged %v without --ping-skipped", got)
		}
		code, stderr := runLR(t, env, "--name", "p-once", "--once-per", "week", "--ping", s.url, "--ping-skipped", "--", "true")
		if code != 0 || !strings.Contains(stderr, "already done") {
			t.Fatalf("third run: exit %d; want 0, already done: %s", code, stderr)
		}
		if got := s.paths(t); strings.Join(got, " ") != "/KEY/log" {
			t.Errorf("pings %v; want /KEY/log", got)
		}
		noKey(t, s.key, stderr)
	})
}

// TestPingNeverDelays: a server that hangs, or a port that refuses, delays
// neither the child's start nor leaderrun's exit beyond the bound (2s), and
// the warning names only the host.
func TestPingNeverDelays(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/0b9d1e7c-5f8a-4c3e-9d2b-7a61c4e8f0a3?token=s3cr3t"
	ln.Close()
	hung := newPingServer(t, true)
	for name, u := range map[string]string{"hangs": hung.url, "refuses": refused} {
		t.Run(name, func(t *testing.T) {
			began := time.Now()
			p := start(t, env, "--name", "slow-"+name, "--ping", u, "--", "sh", "-c", "echo up")
			if l := p.line(); l != "up" {
				t.Fatalf("child printed %q", l)
			}
			childUp := time.Since(began)
			code := p.wait()
			total := time.Since(began)
			t.Logf("child up after %v, leaderrun exited after %v", childUp, total)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, p.stderr.String())
			}
			// Orders of magnitude: a start that waited for the ping would
			// take the request timeout (10s) or forever; an exit beyond
			// the bound would too.
			if childUp > 5*time.Second || total > 10*time.Second {
				t.Errorf("the child started after %v, leaderrun exited after %v; the pings must not delay either beyond the 2s bound", childUp, total)
			}
			stderr := p.stderr.String()
			warn := 0
			for _, l := range strings.Split(stderr, "\n") {
				if strings.Contains(l, "not delivered") {
					warn++
					if !strings.Contains(l, "ping to http://127.0.0.1:") {
						t.Errorf("warning %q does not name the host", l)
					}
				}
			}
			if warn != 1 {
				t.Errorf("%d warnings of undelivered pings; want 1:\n%s", warn, stderr)
			}
			// Each ping named as a ping, the dropped start too.
			if !strings.Contains(stderr, "the start ping: dropped") || !strings.Contains(stderr, "the success ping: ") || strings.Contains(stderr, "success failed") {
				t.Errorf("the warning does not say that the start ping was dropped and the success ping failed:\n%s", stderr)
			}
			noKey(t, "0b9d1e7c-5f8a-4c3e-9d2b-7a61c4e8f0a3", stderr)
			noKey(t, "s3cr3t", stderr)
		})
	}
}

// TestPingBadURL: a URL that is not http(s) is refused before anything
// runs, without printing it.
func TestPingBadURL(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	marker := filepath.Join(t.TempDir(), "ran")
	code, stderr := runLR(t, env, "--ping", "ftp://hc.example/0b9d1e7c-5f8a-4c3e", "--", "touch", marker)
	if code != 125 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("exit %d, %q; want 125 and one line", code, stderr)
	}
	noKey(t, "0b9d1e7c-5f8a-4c3e", stderr)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the child ran despite a bad --ping")
	}
	// Longer than leaderrun-ping reads: refused before anything starts,
	// with the limit, from the flag or the variable.
	long := "https://hc.example/0b9d1e7c-5f8a-4c3e/" + strings.Repeat("k", 70000)
	for _, args := range [][]string{{"--ping", long}, nil} {
		e := env
		if args == nil {
			e = append(append([]string(nil), env...), "LEADERRUN_PING="+long)
		}
		code, stderr := runLR(t, e, append(args, "--", "touch", marker)...)
		if code != 125 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "at most 65535") {
			t.Errorf("a %d-byte URL: exit %d, %q; want 125 and one line with the limit", len(long), code, stderr)
		}
		noKey(t, "0b9d1e7c-5f8a-4c3e", stderr)
		if _, err := os.Stat(marker); err == nil {
			t.Error("the child ran despite a too long --ping")
		}
	}
}

// testHistoryProm makes runs of name (ok, failed, ok) and checks that
// history --format prom says what history --json says of the same records.
func testHistoryProm(t *testing.T, env []string, name string) {
	for _, c := range []struct {
		code int
		args []string
	}{{0, []string{"--", "true"}}, {3, []string{"--", "sh", "-c", "exit 3"}}, {0, []string{"--", "true"}}} {
		if code, stderr := runLR(t, env, append([]string{"--name", name}, c.args...)...); code != c.code {
			t.Fatalf("%v: exit %d; want %d: %s", c.args, code, c.code, stderr)
		}
	}
	code, prom, stderr := leaderOut(t, env, "history", "--format", "prom", name)
	if code != 0 {
		t.Fatalf("history --format prom: exit %d: %s", code, stderr)
	}
	runs := history(t, env, name, "--limit", "0")
	counts := map[string]int{}
	var lastSuccess, lastStart time.Time
	for _, r := range runs {
		o := r.Outcome
		if r.End.IsZero() {
			o = "no-end"
		}
		counts[o]++
		if lastStart.IsZero() && o != "not-started" {
			lastStart = r.Start
		}
		if lastSuccess.IsZero() && o == "ok" {
			lastSuccess = r.End
		}
	}
	if counts["ok"] != 2 || counts["failed"] != 1 {
		t.Fatalf("history --json: %+v; want 2 ok and 1 failed", runs)
	}
	for _, o := range []string{"ok", "failed", "lost", "stepped-down", "stopped", "not-started", "no-end"} {
		if got, want := sample(prom, `leaderrun_history_runs{name="`+name+`",outcome="`+o+`"}`), fmt.Sprint(counts[o]); got != want {
			t.Errorf("runs %s: %q; want %s as in history --json\n%s", o, got, want, prom)
		}
	}
	unix := func(tm time.Time) string { return strconv.FormatFloat(float64(tm.UnixMilli())/1000, 'f', -1, 64) }
	if got, want := sample(prom, `leaderrun_history_last_success_timestamp_seconds{name="`+name+`"}`), unix(lastSuccess); got != want {
		t.Errorf("last success %q; want %s (history --json's newest ok run's end)", got, want)
	}
	if got, want := sample(prom, `leaderrun_history_last_start_timestamp_seconds{name="`+name+`"}`), unix(lastStart); got != want {
		t.Errorf("last start %q; want %s", got, want)
	}
	if got := sample(prom, `leaderrun_history_running{name="`+name+`"}`); got != "0" {
		t.Errorf("running %q; want 0", got)
	}
	f := filepath.Join(t.TempDir(), "h.prom")
	if err := os.WriteFile(f, []byte(prom), 0o644); err != nil {
		t.Fatal(err)
	}
	promCheck(t, requirePromtool(t), f)
	if code, _, stderr := leaderOut(t, env, "history", "--format", "yaml", name); code != 125 || !strings.Contains(stderr, "--format yaml") {
		t.Errorf("--format yaml: exit %d, %q; want 125", code, stderr)
	}
}

func TestFileHistoryProm(t *testing.T) {
	testHistoryProm(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "hprom")
}

func TestRedisHistoryProm(t *testing.T) {
	_, env := redisE2EShared(t)
	testHistoryProm(t, env, e2eName(t, "hprom"))
}

func TestPostgresHistoryProm(t *testing.T) {
	_, env := pgE2EShared(t)
	testHistoryProm(t, env, e2eName(t, "hprom"))
}

func TestEtcdHistoryProm(t *testing.T) {
	_, env := etcdE2EShared(t)
	testHistoryProm(t, env, e2eName(t, "hprom"))
}

func TestAzureHistoryProm(t *testing.T) {
	t.Parallel()
	_, store := azShared(t, "poll=200ms")
	testHistoryProm(t, append(azEnv(azDevKey), "LEADERRUN_STORE="+store), "hprom")
}

// TestRedisPingAndMetrics: the monitoring flags work the same through a
// store program (leaderrun-redis finds leaderrun-ping next to itself).
func TestRedisPingAndMetrics(t *testing.T) {
	_, env := redisE2EShared(t)
	name := e2eName(t, "mon")
	s := newPingServer(t, false)
	path := filepath.Join(t.TempDir(), "job.prom")
	code, stderr := runLR(t, env, "--name", name, "--ping", s.url, "--metrics-file", path, "--", "sh", "-c", "exit 4")
	if code != 4 {
		t.Fatalf("exit %d; want 4: %s", code, stderr)
	}
	if got := s.paths(t); strings.Join(got, " ") != "/KEY/start /KEY/4" {
		t.Errorf("pings %v; want start then 4", got)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `,outcome="failed"} 1`) {
		t.Errorf("metrics file without the failed outcome:\n%s", b)
	}
	noKey(t, s.key, stderr)
}

// readmePromRules checks a Prometheus rules block of the docs with
// promtool check rules.
func readmePromRules(t *testing.T, _ *readmeFixture, b *readmeBlock) {
	promtool := requirePromtool(t)
	f := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(f, []byte(strings.Join(b.body, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("%s:%d: promtool check rules: %v\n%s", b.file, b.line, err, out)
	}
}

// TestPingHelperFails: a leaderrun-ping that dies at once, or hangs without
// reading, is one warning line, and leaderrun's exit still waits at most
// the bound (2s, and 0.25s to kill it).
func TestPingHelperFails(t *testing.T) {
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	for name, script := range map[string]string{"dies": "exit 0", "hangs": "exec sleep 60"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(lrBin)
			if err != nil {
				t.Fatal(err)
			}
			// A copy, not a link: leaderrun looks next to its real path.
			if err := os.WriteFile(filepath.Join(dir, "leaderrun"), b, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "leaderrun-ping"), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(filepath.Join(dir, "leaderrun"), "--name", "helper-"+name, "--ping", "http://127.0.0.1:9/0b9d1e7c-5f8a", "--", "true")
			cmd.Env = append(os.Environ(), env...)
			began := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(began)
			t.Logf("exited after %v: %s", took, out)
			if err != nil {
				t.Fatalf("exit: %v: %s", err, out)
			}
			if n := strings.Count(string(out), "not delivered"); n != 1 {
				t.Errorf("%d warnings; want 1", n)
			}
			if took > 10*time.Second {
				t.Errorf("leaderrun took %v to exit; the pings' bound is 2s", took)
			}
			noKey(t, "0b9d1e7c-5f8a", string(out))
		})
	}
}

// TestPingKuma: an Uptime Kuma push URL is known by its path and gets
// Kuma's one request at the end, from leaderrun through leaderrun-ping:
// GET with status=down for a failure, the final line as msg and the run's
// duration in ms as ping; no start request (a push monitor has none), the
// URL's own query (as Kuma's interface shows it) replaced.
func TestPingKuma(t *testing.T) {
	t.Parallel()
	type req struct {
		method, path string
		query        map[string][]string
	}
	got := make(chan req, 4)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- req{r.Method, r.URL.Path, r.URL.Query()}
		fmt.Fprintln(w, `{"ok":true}`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	env := []string{"LEADERRUN_STORE=" + fileStore(t), "LEADERRUN_PING=http://" + ln.Addr().String() + "/api/push/Xk3a9S3cr3t?status=up&msg=OK&ping="}
	code, stderr := runLR(t, env, "--name", "p-kuma", "-v", "--", "sh", "-c", "sleep 0.2; exit 3")
	if code != 3 {
		t.Fatalf("exit %d; want 3: %s", code, stderr)
	}
	noKey(t, "Xk3a9S3cr3t", stderr)
	close(got) // leaderrun waited for leaderrun-ping, which waited for the answers
	var reqs []req
	for r := range got {
		reqs = append(reqs, r)
	}
	if len(reqs) != 1 {
		t.Fatalf("Kuma got %d requests, %+v; want the end's one", len(reqs), reqs)
	}
	r := reqs[0]
	ms, _ := strconv.Atoi(strings.Join(r.query["ping"], ""))
	if r.method != http.MethodGet || r.path != "/api/push/Xk3a9S3cr3t" || strings.Join(r.query["status"], ",") != "down" ||
		len(r.query["msg"]) != 1 || !strings.Contains(r.query["msg"][0], "lease p-kuma") || len(r.query) != 3 || ms < 200 {
		t.Errorf("Kuma got %+v; want GET /api/push/TOKEN?status=down&msg=…&ping=MS (MS ≥ 200, the child's sleep)", r)
	}
}
