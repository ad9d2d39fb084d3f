package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// freePort is a TCP port on 127.0.0.1 that nothing listened on a moment
// ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// getStatus is the status code of GET url ("" when there is no answer).
func getStatus(t *testing.T, url string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// The lease lost under a running leader (its lock file replaced), or
// leaderrun told to stop (SIGTERM, a clean handover): /leader answers 503
// before the child gets its stop signal. Two witnesses: the child itself
// asks /leader in its SIGTERM trap, after the signal (it must hear 503);
// and the kernel's stamp of the death of a process of the child's group
// that dies of that SIGTERM at once (leasetest.WatchDeath) comes after
// leaderrun-listen's own clock reading of when it answered 503 (its
// acknowledgement, logged at -v).
func TestListen503BeforeSignal(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		stop func(t *testing.T, p *lr, dir string)
		code int
	}{
		"lost":    {replaceLockFile, 124},
		"SIGTERM": {func(_ *testing.T, p *lr, _ string) { _ = p.cmd.Process.Signal(syscall.SIGTERM) }, 0},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			port := freePort(t)
			answer := filepath.Join(t.TempDir(), "answer")
			script := `trap 'exec 3<>/dev/tcp/127.0.0.1/` + port + `; printf "GET /leader HTTP/1.0\r\n\r\n" >&3; read -r _ code _ <&3; echo "$code" > ` + answer + `; exit 0' TERM
sleep 300 & echo "ready $!"; wait`
			p := start(t, []string{"LEADERRUN_STORE=file://" + dir}, "-v", "--listen", "127.0.0.1:"+port, "--name", "victim", "--", "bash", "-c", script)
			f := strings.Fields(p.line())
			if len(f) != 2 || f[0] != "ready" {
				t.Fatalf("the child said %q", f)
			}
			sleeper, _ := strconv.Atoi(f[1])
			died := leasetest.WatchDeath(t, sleeper)
			if got := getStatus(t, "http://127.0.0.1:"+port+"/leader"); got != "200" {
				t.Fatalf("/leader answered %q while the child runs; want 200 (stderr: %s)", got, p.stderr.String())
			}
			tc.stop(t, p, dir)
			if code := p.wait(); code != tc.code {
				t.Fatalf("exit %d; want %d (stderr: %s)", code, tc.code, p.stderr.String())
			}
			if got, _ := os.ReadFile(answer); strings.TrimSpace(string(got)) != "503" {
				t.Errorf("the child, stopped, heard /leader answer %q; want 503", got)
			}
			m := regexp.MustCompile(`listen_boot_ns=(\d+)`).FindStringSubmatch(p.stderr.String())
			if m == nil {
				t.Fatalf("no acknowledgement of the stop logged: %s", p.stderr.String())
			}
			acked, _ := strconv.ParseInt(m[1], 10, 64)
			var death leasetest.Death
			select {
			case death = <-died:
			case <-time.After(10 * time.Second):
				t.Fatalf("process %d of the child's group still alive 10s after leaderrun exited", sleeper)
			}
			t.Logf("/leader answered 503 %v before a process of the child's group died of the stop signal", (death.Boot - time.Duration(acked)).Round(time.Microsecond))
			if time.Duration(acked) >= death.Boot {
				t.Fatalf("/leader answered 503 %v after the child's group was signalled", time.Duration(acked)-death.Boot)
			}
		})
	}
}

// replaceLockFile replaces the file store's lock file of the lease victim
// in dir: its holder has lost it.
func replaceLockFile(t *testing.T, _ *lr, dir string) {
	path := filepath.Join(dir, "victim.lock")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// What --listen refuses comes before anything starts: an address in use
// (one line, exit 125, no child); and a run without the flag does not
// need leaderrun-listen at all, nor starts it: leaderrun alone in a
// directory, with no leaderrun-listen on PATH, runs, and with --listen
// says which program is missing.
func TestListenRefusedBeforeStart(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	t.Run("in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		marker := filepath.Join(t.TempDir(), "ran")
		code, stderr := runLR(t, append(env, "LEADERRUN_LISTEN="+ln.Addr().String()), "--name", "busy", "--", "touch", marker)
		// Named as it was given: by its variable.
		if code != 125 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "address already in use") || !strings.Contains(stderr, "LEADERRUN_LISTEN="+ln.Addr().String()+" (--listen)") {
			t.Fatalf("exit %d, stderr %q; want 125 and one line saying the address LEADERRUN_LISTEN gave is in use", code, stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the child ran")
		}
	})
	t.Run("absent", func(t *testing.T) {
		alone := filepath.Join(t.TempDir(), "leaderrun")
		b, err := os.ReadFile(lrBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(alone, b, 0o755); err != nil {
			t.Fatal(err)
		}
		bare := append([]string{"PATH=/usr/bin:/bin", "NO_COLOR=1"}, env...)
		if code, _, stderr := runOut(t, bare, "", alone, "--name", "alone", "--", "true"); code != 0 {
			t.Fatalf("without --listen and without leaderrun-listen: exit %d: %s", code, stderr)
		}
		code, _, stderr := runOut(t, bare, "", alone, "--listen", ":0", "--name", "alone", "--", "true")
		if code != 125 || !strings.Contains(stderr, "leaderrun-listen") {
			t.Fatalf("--listen without leaderrun-listen: exit %d, %q; want 125 naming it", code, stderr)
		}
	})
}

// docs/listen.md's haproxy recipe, with Debian's haproxy: three instances
// behind it, each with its application (here a server of the test's that
// answers its instance's number, whatever the lease) and its leaderrun
// --listen, whose /leader is haproxy's health check. Clients reach only
// the leader's application; when the leader stops (a clean handover) the
// traffic moves to the instance that took the lease over.
func TestListenHAProxy(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	var backends, checks []string
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, i) })}
		go func() { _ = srv.Serve(ln) }() // ends with Close at cleanup
		t.Cleanup(func() { srv.Close() })
		checks = append(checks, freePort(t))
		backends = append(backends, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)+":"+checks[i])
	}
	hpDir := t.TempDir()
	hp := leasetest.StartServer(t, hpDir, "scripts/haproxy.sh", append([]string{}, backends...)...)["LEADERRUN_TEST_HAPROXY"]
	// haproxy says when its checks change a server's state: servers start
	// up, and each check (every 100 ms, each server on its own timer) can
	// take one down or bring it up.
	hpLog := filepath.Join(hpDir, "haproxy.log")
	hpSaid := func(what string) { awaitLogLine(t, hpLog, what, 0) }
	instances := make([]*lr, 3)
	for i := range 3 {
		instances[i] = start(t, env, "--listen", "127.0.0.1:"+checks[i], "--name", "web", "--", "sh", "-c", "echo ready; exec sleep 300")
		if i == 0 {
			instances[0].line() // the first leads
		} else {
			waitStderr(t, instances[i], "waiting", 30*time.Second)
		}
	}
	front := "http://" + hp + "/"
	reached := func() string {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(front)
		if err != nil {
			return "error"
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return strconv.Itoa(resp.StatusCode)
		}
		return string(b)
	}
	// haproxy's first checks (every 100 ms) find the leader.
	first := awaitReached(t, reached, func(s string) bool { return s == "0" })
	t.Logf("haproxy routed to the leader %v after its start", first.Round(time.Millisecond))
	hpSaid("Server leader/s2 is DOWN")
	hpSaid("Server leader/s3 is DOWN")
	for range 20 {
		if got := reached(); got != "0" {
			t.Fatalf("a client reached %q; want only the leader, 0", got)
		}
	}
	// s1 was DOWN already once, at haproxy's start if its first check
	// came before the leader listened: the handover's is after this.
	before, _ := os.ReadFile(hpLog)
	_ = instances[0].cmd.Process.Signal(syscall.SIGTERM)
	took := awaitReached(t, reached, func(s string) bool { return s == "1" || s == "2" })
	instances[0].wait()
	t.Logf("clean handover: traffic reached the new leader %v after the old one was told to stop", took.Round(time.Millisecond))
	var next string
	for i := 1; i < 3; i++ {
		if getStatus(t, "http://127.0.0.1:"+checks[i]+"/leader") == "200" {
			next = strconv.Itoa(i)
		}
	}
	// The new leader's server can come up before the old one's next check
	// takes it down: for up to one check interval both get traffic.
	awaitLogLine(t, hpLog, "Server leader/s1 is DOWN", len(before))
	for range 20 {
		if got := reached(); got != next {
			t.Fatalf("after the handover a client reached %q; want only the new leader, %s", got, next)
		}
	}
	for _, p := range instances[1:] {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait()
	}
}

// awaitReached asks reached until ok says its answer is the one awaited,
// and says how long that took; a minute without is a failure.
func awaitReached(t *testing.T, reached func() string, ok func(string) bool) time.Duration {
	t.Helper()
	began := time.Now()
	for last := ""; ; time.Sleep(10 * time.Millisecond) {
		if last = reached(); ok(last) {
			return time.Since(began)
		}
		if time.Since(began) > time.Minute {
			t.Fatalf("clients still reach %q a minute on", last)
		}
	}
}

// promQuery runs an instant query against Prometheus at addr and returns
// each series of the result as its labels' "instance" and its value.
func promQuery(t *testing.T, addr, query string) map[string]string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %q: %s, %v", query, r.Status, err)
	}
	out := map[string]string{}
	for _, s := range r.Data.Result {
		out[s.Metric["instance"]] = fmt.Sprint(s.Value[1])
	}
	return out
}

// awaitQuery waits until want accepts the result of query (Prometheus
// scrapes and evaluates every 250 ms here; nothing announces a scrape).
func awaitQuery(t *testing.T, addr, query string, want func(map[string]string) bool) map[string]string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := promQuery(t, addr, query)
		if want(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %v a minute on", query, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// docs/listen.md's monitoring, with Debian's Prometheus scraping three
// instances' /metrics and evaluating the page's NoLeader rule: while a run
// without --listen holds the lease and the three wait, the rule's
// condition holds (the alert is pending: it fires after its 2 minutes);
// once that run ends, exactly one of the three leads, /metrics says which,
// and the alert is gone.
func TestListenPrometheus(t *testing.T) {
	t.Parallel()
	var rules string
	for _, b := range readmeParse(t, "docs/listen.md") {
		if b.marker == "listen-prom-rules" {
			rules = strings.Join(b.body, "\n") + "\n"
		}
	}
	if rules == "" {
		t.Fatal("docs/listen.md has no listen-prom-rules block")
	}
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rulesFile, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	holder, release := leaderUntilStdin(t, env, "web", nil)
	var targets []string
	instances := make([]*lr, 3)
	for i := range instances {
		addr := "127.0.0.1:" + freePort(t)
		targets = append(targets, addr)
		instances[i] = start(t, env, "--listen", addr, "--name", "web", "--", "sh", "-c", "echo ready; exec sleep 300")
		waitStderr(t, instances[i], "waiting", 30*time.Second)
	}
	prom := leasetest.StartServer(t, filepath.Join(dir, "prometheus"), "scripts/prometheus.sh", append([]string{rulesFile}, targets...)...)["LEADERRUN_TEST_PROMETHEUS"]
	awaitQuery(t, prom, `up == 1`, func(m map[string]string) bool { return len(m) == 3 })
	awaitQuery(t, prom, `ALERTS{alertname="NoLeader", alertstate="pending"}`, func(m map[string]string) bool { return len(m) == 1 })
	release()
	if c := holder.wait(); c != 0 {
		t.Fatalf("the first holder exited %d: %s", c, holder.stderr.String())
	}
	leading := awaitQuery(t, prom, `leaderrun_leading == 1`, func(m map[string]string) bool { return len(m) == 1 })
	var leader string
	for i, a := range targets {
		if getStatus(t, "http://"+a+"/leader") == "200" {
			leader = a
			if instances[i].line() != "ready" {
				t.Fatalf("the leader's child did not start")
			}
		}
	}
	if _, ok := leading[leader]; !ok {
		t.Fatalf("Prometheus says %v leads; /leader answers 200 at %s", leading, leader)
	}
	awaitQuery(t, prom, `ALERTS{alertname="NoLeader"}`, func(m map[string]string) bool { return len(m) == 0 })
	if got := promQuery(t, prom, `sum(leaderrun_leading)`); got[""] != "1" {
		t.Fatalf("sum(leaderrun_leading) = %v; want 1", got)
	}
}

// awaitLogLine waits until the file at path holds, past its first from
// bytes, a line containing what (a server's log, written as things
// happen), at most a minute.
func awaitLogLine(t *testing.T, path, what string, from int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) >= from && strings.Contains(string(b[from:]), what) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("%s does not say %q a minute on:\n%s", path, what, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
