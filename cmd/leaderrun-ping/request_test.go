package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

// sent is one request a service got, as its docs describe one: method,
// path, query and body.
type sent struct {
	method, path string
	query        url.Values
	body         string
}

// service is a server on 127.0.0.1 that records every request.
func service(t *testing.T) (*httptest.Server, func() []sent) {
	var mu sync.Mutex
	var got []sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, sent{r.Method, r.URL.Path, r.URL.Query(), string(b)})
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() []sent {
		mu.Lock()
		defer mu.Unlock()
		return append([]sent(nil), got...)
	}
}

// pings runs leaderrun-ping with base, format and the pings, and returns
// its report.
func pings(t *testing.T, base string, format pingwire.Format, ps ...pingwire.Ping) string {
	t.Helper()
	in := base + "\n2000\n" + string(format) + "\n0\n"
	for _, p := range ps {
		in += p.Line()
	}
	var out strings.Builder
	if code := run(strings.NewReader(in), &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	return out.String()
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkRequests compares got with want, a run id standing for "any UUID,
// the same in every request".
func checkRequests(t *testing.T, got, want []sent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the service got %d requests, %+v; want %d, %+v", len(got), got, len(want), want)
	}
	rid := ""
	for i := range got {
		g, w := got[i], want[i]
		for _, k := range []string{"rid", "series"} {
			if v := g.query.Get(k); v != "" && w.query.Get(k) == "RUNID" {
				if !uuidRE.MatchString(v) || (rid != "" && v != rid) {
					t.Errorf("request %d: %s=%q; want one random UUID for the run (%q before)", i, k, v, rid)
				}
				rid = v
				w.query.Set(k, v)
			}
		}
		if g.method != w.method || g.path != w.path || g.query.Encode() != w.query.Encode() || g.body != w.body {
			t.Errorf("request %d:\n got %s %s ?%s body %q\nwant %s %s ?%s body %q", i,
				g.method, g.path, g.query.Encode(), g.body, w.method, w.path, w.query.Encode(), w.body)
		}
	}
}

var (
	start  = pingwire.Ping{Kind: "start"}
	ok     = pingwire.Ping{Kind: "ok", Took: 41234 * time.Millisecond, Body: "leaderrun: lease backup, outcome ok, 41.234s: done"}
	failed = pingwire.Ping{Kind: "3", Took: 1500 * time.Millisecond, Body: "leaderrun: lease backup, outcome failed, 1.5s: exit 3"}
)

// TestFormats: each format's requests are what its service documents:
// method, path and query exactly, the exit code, duration and run id
// where the service has a field for them, and the user's own query (an
// Uptime Kuma push URL is copied with ?status=up&msg=OK&ping=) kept but
// for the parameters the format sets.
func TestFormats(t *testing.T) {
	q := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	cases := []struct {
		format pingwire.Format
		path   string // the check's path, with a query of its own
		ps     []pingwire.Ping
		want   []sent
	}{{
		// https://healthchecks.io/docs/http_api/ and
		// https://healthchecks.io/docs/measuring_script_run_time/ (rid):
		// POST, /start, the bare URL for success, /EXIT-STATUS otherwise.
		pingwire.Healthchecks, "/ping/0b9d1e7c", []pingwire.Ping{start, ok, start, failed}, []sent{
			{"POST", "/ping/0b9d1e7c/start", q("rid", "RUNID"), ""},
			{"POST", "/ping/0b9d1e7c", q("rid", "RUNID"), ok.Body},
			{"POST", "/ping/0b9d1e7c/start", q("rid", "RUNID"), ""},
			{"POST", "/ping/0b9d1e7c/3", q("rid", "RUNID"), failed.Body},
		},
	}, {
		// Uptime Kuma's push monitor (the push URL its web interface
		// shows, https://github.com/louislam/uptime-kuma/wiki/Internal-API):
		// GET /api/push/TOKEN?status=up|down&msg=TEXT&ping=MS; no start.
		pingwire.Kuma, "/api/push/Xk3a9?status=up&msg=OK&ping=", []pingwire.Ping{ok, failed}, []sent{
			{"GET", "/api/push/Xk3a9", q("status", "up", "msg", ok.Body, "ping", "41234"), ""},
			{"GET", "/api/push/Xk3a9", q("status", "down", "msg", failed.Body, "ping", "1500"), ""},
		},
	}, {
		// Cronitor's telemetry API, https://cronitor.io/docs/telemetry-api:
		// /p/API-KEY/MONITOR?state=run|complete|fail, series pairs a run's
		// events, status_code, metric=duration:SECONDS, message.
		pingwire.Cronitor, "/p/k3y/nightly-job?env=production", []pingwire.Ping{start, ok, start, failed}, []sent{
			{"GET", "/p/k3y/nightly-job", q("env", "production", "state", "run", "series", "RUNID"), ""},
			{"GET", "/p/k3y/nightly-job", q("env", "production", "state", "complete", "series", "RUNID", "status_code", "0", "metric", "duration:41.234", "message", ok.Body), ""},
			{"GET", "/p/k3y/nightly-job", q("env", "production", "state", "run", "series", "RUNID"), ""},
			{"GET", "/p/k3y/nightly-job", q("env", "production", "state", "fail", "series", "RUNID", "status_code", "3", "metric", "duration:1.500", "message", failed.Body), ""},
		},
	}, {
		// Better Stack's heartbeat,
		// https://betterstack.com/docs/uptime/cron-and-heartbeat-monitor/:
		// GET or POST the URL; a failure appends the exit code, with the
		// output as the body. No start, no run id.
		pingwire.BetterStack, "/api/v1/heartbeat/T0k3n", []pingwire.Ping{ok, failed}, []sent{
			{"POST", "/api/v1/heartbeat/T0k3n", q(), ok.Body},
			{"POST", "/api/v1/heartbeat/T0k3n/3", q(), failed.Body},
		},
	}}
	for _, tc := range cases {
		t.Run(string(tc.format), func(t *testing.T) {
			t.Parallel()
			srv, got := service(t)
			report := pings(t, srv.URL+tc.path, tc.format, tc.ps...)
			var want []string
			for _, p := range tc.ps {
				want = append(want, p.Kind+" ok")
			}
			if report != strings.Join(want, "\n")+"\n" {
				t.Errorf("report %q; want %q", report, want)
			}
			checkRequests(t, got(), tc.want)
		})
	}
}

// TestDetect: the format is taken from the URL only where its shape is
// one service's; anything else is healthchecks.io's.
func TestDetect(t *testing.T) {
	for raw, want := range map[string]pingwire.Format{
		"https://hc-ping.com/0b9d1e7c-5f8a":                        pingwire.Healthchecks,
		"https://hc.example.com/ping/0b9d1e7c":                     pingwire.Healthchecks,
		"https://cronitor.link/p/k3y/nightly-job":                  pingwire.Cronitor,
		"https://CRONITOR.LINK/p/k3y/nightly-job":                  pingwire.Cronitor,
		"https://uptime.betterstack.com/api/v1/heartbeat/T0k3n":    pingwire.BetterStack,
		"https://betteruptime.com/api/v1/heartbeat/T0k3n":          pingwire.BetterStack,
		"https://uptime.betterstack.com/other":                     pingwire.Healthchecks,
		"https://kuma.example.com/api/push/Xk3a9?status=up&msg=OK": pingwire.Kuma,
		"http://10.0.0.5:3001/api/push/Xk3a9":                      pingwire.Kuma,
		"https://example.com/api/push/a/b":                         pingwire.Healthchecks,
		"https://example.com/x/api/push/Xk3a9":                     pingwire.Healthchecks,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := pingwire.Detect(u); got != want {
			t.Errorf("Detect(%s) = %s; want %s", raw, got, want)
		}
		if got, ok := pingwire.ParseFormat("auto", u); !ok || got != want {
			t.Errorf("ParseFormat(auto, %s) = %s, %v; want %s", raw, got, ok, want)
		}
	}
	if _, ok := pingwire.ParseFormat("healthchecks", nil); ok {
		t.Error(`ParseFormat("healthchecks") accepted a name that is not a format`)
	}
}
