package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

// recorder is an HTTP server on 127.0.0.1 (httptest's) that records what
// it is sent and answers with answer.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []string // "METHOD PATH body=BODY referer=REFERER"
	answer func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *recorder {
	rec := &recorder{answer: answer}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 1024)
		n, _ := r.Body.Read(b)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, fmt.Sprintf("%s %s body=%q referer=%q", r.Method, r.URL.Path, b[:n], r.Referer()))
		rec.mu.Unlock()
		if rec.answer != nil {
			rec.answer(w, r)
		}
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) got() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.reqs...)
}

// runPing runs leaderrun-ping's run with url and one success ping, and
// returns its report.
func runPing(t *testing.T, url string) (string, int) {
	t.Helper()
	var out strings.Builder
	code := run(strings.NewReader(url+"\n2000\nhc\n0\nok\t1500\tthe end's body\n"), &out)
	return out.String(), code
}

// TestRedirectNotFollowed: a redirect, to another origin or the same one,
// with any 3xx code, is not followed: the target gets no request (so no
// Referer with the check's secret, and no body-less GET that would count
// as a ping), and the report says the ping failed, naming the target by
// its origin only, never the secret path or query.
func TestRedirectNotFollowed(t *testing.T) {
	other := newRecorder(t, nil)
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, where := range []string{"another origin", "same origin"} {
			t.Run(fmt.Sprintf("%d to %s", code, where), func(t *testing.T) {
				var self *recorder
				self = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
					if strings.HasPrefix(r.URL.Path, "/moved") {
						return // 200: a followed redirect would count as delivered
					}
					target := other.URL + "/moved/0b9d1e7c?key=s3cret"
					if where == "same origin" {
						target = self.URL + "/moved/0b9d1e7c?key=s3cret"
					}
					http.Redirect(w, r, target, code)
				})
				before := len(other.got())
				report, exit := runPing(t, self.URL+"/0b9d1e7c-5f8a?key=s3cret")
				if exit != 0 {
					t.Fatalf("exit %d: %s", exit, report)
				}
				wantTarget := " to " + other.URL
				if where == "same origin" {
					wantTarget = " within the same origin"
				}
				want := fmt.Sprintf("ok failed: HTTP %d, a redirect%s, not followed: give --ping the URL it redirects to\n", code, wantTarget)
				if report != want {
					t.Errorf("report %q; want %q", report, want)
				}
				if strings.Contains(report, "0b9d1e7c") || strings.Contains(report, "s3cret") {
					t.Errorf("the report shows the URL's secret: %q", report)
				}
				if got := other.got()[before:]; len(got) != 0 {
					t.Errorf("the other origin was sent %q", got)
				}
				got := self.got()
				if len(got) != 1 || !strings.HasPrefix(got[0], "POST /0b9d1e7c-5f8a body=\"the end's body\" referer=\"\"") {
					t.Errorf("the ping's origin got %q; want the one POST, without a Referer", got)
				}
			})
		}
	}
}

// TestURLLimit: a URL of pingwire.MaxURL bytes (what leaderrun accepts)
// is read and delivered; a longer one is refused with the limit, not
// taken for a run by hand.
func TestURLLimit(t *testing.T) {
	srv := newRecorder(t, nil)
	base := srv.URL + "/0b9d1e7c-"
	long := base + strings.Repeat("a", pingwire.MaxURL-len(base))
	if report, code := runPing(t, long); code != 0 || report != "ok ok\n" {
		t.Errorf("a URL of %d bytes: exit %d, %q; want 0 and ok ok", len(long), code, report)
	}
	if got := srv.got(); len(got) != 1 || !strings.HasPrefix(got[0], "POST /0b9d1e7c-aaa") {
		t.Errorf("the server got %.80q; want the one ping", got)
	}
	report, code := runPing(t, long+"a")
	if want := fmt.Sprintf("all failed: the URL is longer than %d bytes\n", pingwire.MaxURL); code != 2 || report != want {
		t.Errorf("a URL of %d bytes: exit %d, %q; want 2 and %q", len(long)+1, code, report, want)
	}
}
