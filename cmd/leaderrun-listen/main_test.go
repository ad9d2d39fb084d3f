package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/boottime"
	"github.com/leaderrun/leaderrun/internal/listenwire"
)

// served is run serving hello, fed by the test.
type served struct {
	in   *io.PipeWriter
	out  *bufio.Scanner
	addr string
	done chan int
	seq  uint64
}

func serve(t *testing.T, hello listenwire.Hello) *served {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &served{in: inW, out: bufio.NewScanner(outR), done: make(chan int, 1)}
	go func() { // ends when its input does
		s.done <- run(inR, outW)
		outW.Close()
	}()
	b, _ := json.Marshal(hello)
	fmt.Fprintf(inW, "%s\n", b)
	if !s.out.Scan() {
		t.Fatal("no answer to the hello")
	}
	line := s.out.Text()
	var ok bool
	if s.addr, ok = strings.CutPrefix(line, "bound "); !ok {
		t.Fatalf("hello answered %q", line)
	}
	t.Cleanup(func() {
		inW.Close()
		for s.out.Scan() {
		}
		if code := <-s.done; code != 0 {
			t.Errorf("leaderrun-listen exited %d once its input ended", code)
		}
	})
	return s
}

// send applies st and waits for its acknowledgement.
func (s *served) send(t *testing.T, st listenwire.State) {
	t.Helper()
	s.seq++
	st.Seq = s.seq
	b, _ := json.Marshal(st)
	fmt.Fprintf(s.in, "%s\n", b)
	if !s.out.Scan() || !strings.HasPrefix(s.out.Text(), fmt.Sprintf("ack %d ", s.seq)) {
		t.Fatalf("state %d not acknowledged: %q", s.seq, s.out.Text())
	}
}

func request(t *testing.T, method, url string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /leader: 200 only while holding with the child started and the stop
// point more than listenwire.Lead away, by leaderrun-listen's own clock;
// only GET and HEAD of the three paths; a request's header is bounded.
func TestServe(t *testing.T) {
	t.Parallel()
	s := serve(t, listenwire.Hello{Addr: "127.0.0.1:0", Name: "job", Holder: "h1", Slots: 1})
	base := "http://" + s.addr
	now := boottime.Boot{}.Now()
	holding := listenwire.State{Role: listenwire.RoleHolding, Holder: &listenwire.Holder{Label: "h1", Token: 42}, StopAt: int64(now + time.Hour)}
	for _, tc := range []struct {
		name string
		st   listenwire.State
		want int
	}{
		{"waiting", listenwire.State{Role: listenwire.RoleWaiting}, 503},
		{"holding, child not started", holding, 503},
		{"holding, child started", func() listenwire.State { h := holding; h.Started = true; return h }(), 200},
		{"stop point within the lead", func() listenwire.State {
			h := holding
			h.Started, h.StopAt = true, int64(boottime.Boot{}.Now()+listenwire.Lead/2)
			return h
		}(), 503},
		{"file store, no stop point", func() listenwire.State { h := holding; h.Started, h.StopAt = true, 0; return h }(), 200},
		{"stopping", listenwire.State{Role: listenwire.RoleStopping, Started: true, Holder: holding.Holder}, 503},
	} {
		s.send(t, tc.st)
		if code, _ := request(t, "GET", base+"/leader", nil); code != tc.want {
			t.Errorf("%s: GET /leader = %d; want %d", tc.name, code, tc.want)
		}
		if code, _ := request(t, "HEAD", base+"/leader", nil); code != tc.want {
			t.Errorf("%s: HEAD /leader = %d; want %d", tc.name, code, tc.want)
		}
	}
	if code, body := request(t, "GET", base+"/status", nil); code != 200 || !strings.Contains(body, `"role":"stopping"`) || !strings.Contains(body, `"token":42`) {
		t.Errorf("GET /status = %d %s", code, body)
	}
	for _, tc := range []struct{ method, path string }{{"POST", "/leader"}, {"GET", "/"}, {"GET", "/leader/x"}, {"GET", "/debug/pprof/"}} {
		if code, _ := request(t, tc.method, base+tc.path, nil); code != 405 && code != 404 {
			t.Errorf("%s %s = %d; want 404 or 405", tc.method, tc.path, code)
		}
	}
	big := http.Header{"X-Big": {strings.Repeat("a", 64<<10)}}
	if code, _ := request(t, "GET", base+"/leader", big); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("GET with a 64 kB header = %d; want 431", code)
	}
}

// /metrics passes promtool check metrics in every role.
func TestMetricsPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: run scripts/test.sh once (it extracts promtool from Debian's prometheus package into .tools/bin) and put .tools/bin on PATH")
	}
	hello := listenwire.Hello{Name: `we"ird\name`, Holder: "host:1", Slots: 1}
	var h listenwire.Histogram
	for _, d := range []time.Duration{time.Millisecond / 2, 3 * time.Millisecond, 7 * time.Second} {
		h.Observe(d)
	}
	now := boottime.Boot{}.Now()
	for name, st := range map[string]listenwire.State{
		"waiting": {Role: listenwire.RoleWaiting},
		"holding": {Role: listenwire.RoleHolding, Started: true, Holder: &listenwire.Holder{Label: "host:1", Token: 1 << 50}, StopAt: int64(now + time.Hour),
			LastRenewal: time.Now(), Renewals: h, RenewalsFailed: 2, Transitions: 3},
		"lost": {Role: listenwire.RoleLost, Renewals: h, Last: &listenwire.Outcome{Outcome: "lost", Code: 124}},
	} {
		text := metricsText(hello, st, now)
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(string(text))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: promtool check metrics: %v\n%s\n%s", name, err, out, text)
		}
		if name == "holding" {
			for _, want := range []string{"leaderrun_leading{", "} 1\n", `le="+Inf"} 3`, "leaderrun_renewal_duration_seconds_count{", "leaderrun_fencing_token{"} {
				if !strings.Contains(string(text), want) {
					t.Errorf("holding: no %q in\n%s", want, text)
				}
			}
		}
	}
}

// A Unix socket left by an instance that died is replaced; one that
// another process serves is not.
//
// Not parallel: a test that starts a program (promtool) forks, and the
// child holds a copy of every descriptor until its exec, the closed
// listener's too, which then still accepts: a served socket.
func TestListenUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lr.sock")
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listen("unix:" + path); err == nil {
		t.Fatal("bound a socket another process serves")
	}
	other.(*net.UnixListener).SetUnlinkOnClose(false)
	other.Close() // the socket file stays, nobody accepts: a dead instance's
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	ln, err := listen("unix:" + path)
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	ln.Close()
}
