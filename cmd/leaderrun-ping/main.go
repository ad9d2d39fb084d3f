// Command leaderrun-ping sends a run's --ping requests for leaderrun, which
// links no network code itself: leaderrun starts it only for a run with
// --ping. It reads on its standard input the URL, the bound in
// milliseconds, then one line per ping: a kind ("start", "ok", an exit
// code, "log"), a tab and a body. It sends them in order, the way
// healthchecks.io expects (URL/start, URL, URL/CODE, URL/log, each with
// ?rid= a run id that pairs them), retrying with backoff. A start ping not
// delivered within a quarter of the bound after a later ping arrived is
// dropped, so that the end goes out in time. Once its input ends, it
// gives up after the bound and writes one line per ping on its standard
// output: "KIND ok", "KIND dropped" or "KIND failed: REASON", never the
// URL, whose path and query are secrets. It is not meant to be run by hand.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	// The run's end is worth telling even when leaderrun was told to stop:
	// systemd's stop signals the whole unit, a terminal's Ctrl-C the
	// foreground group. This program ends by itself within the bound once
	// its input ends, which leaderrun's exit (or death) ensures.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	os.Exit(run(os.Stdin, os.Stdout))
}

// ping is one request to send.
type ping struct {
	kind, body string
}

func run(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	var base *url.URL
	var bound time.Duration
	if sc.Scan() {
		base, _ = url.Parse(sc.Text())
	}
	if sc.Scan() {
		ms, _ := strconv.Atoi(sc.Text())
		bound = time.Duration(ms) * time.Millisecond
	}
	if base == nil || bound <= 0 {
		fmt.Fprintln(out, "all failed: leaderrun-ping is started by leaderrun --ping, not by hand")
		return 2
	}
	s := &sender{base: base, rid: newRunID(), client: &http.Client{}}

	// all ends bound after the input does; start ends too when a later
	// ping arrives.
	all, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	start, dropStart := context.WithCancel(all)
	defer dropStart()
	queue := make(chan ping, 16)
	go func() { // ends with the input; the queue's reader below outlives it
		defer close(queue)
		for sc.Scan() {
			kind, body, _ := strings.Cut(sc.Text(), "\t")
			if kind != "start" {
				// A start still queued or in flight gets a quarter of the
				// bound more: a fast child's start is sent, one a server
				// sits on is given up for the end.
				time.AfterFunc(bound/4, dropStart)
			}
			queue <- ping{kind, body}
		}
		time.AfterFunc(bound, cancelAll)
	}()
	var report []string
	for p := range queue {
		ctx := all
		if p.kind == "start" {
			ctx = start
		}
		err := s.deliver(ctx, p)
		switch {
		case err == nil:
			report = append(report, p.kind+" ok")
		case p.kind == "start" && start.Err() != nil && all.Err() == nil:
			report = append(report, p.kind+" dropped")
		default:
			report = append(report, p.kind+" failed: "+err.Error())
		}
	}
	fmt.Fprint(out, strings.Join(report, "\n")+"\n")
	return 0
}

// sender sends pings to one check.
type sender struct {
	base   *url.URL
	rid    string
	client *http.Client
}

// attemptTimeout bounds one request while the run goes on (a start ping);
// at the end, the bound left is the limit.
const attemptTimeout = 10 * time.Second

// deliver sends p, retrying with backoff (0.1s doubling to 5s) on network
// errors, 5xx and 429, until ctx ends; other answers are final.
func (s *sender) deliver(ctx context.Context, p ping) error {
	backoff := 100 * time.Millisecond
	for {
		err := s.send(ctx, p)
		var perm permanentError
		if err == nil || errors.As(err, &perm) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// permanentError is an answer that a retry would not change.
type permanentError struct{ status int }

func (e permanentError) Error() string { return "HTTP " + strconv.Itoa(e.status) }

// send makes one request. Its error never holds the URL: net/http's
// *url.Error does, so only what it wraps is kept.
func (s *sender) send(ctx context.Context, p ping) error {
	u := *s.base
	switch p.kind {
	case "ok":
	default:
		u.Path = strings.TrimSuffix(u.Path, "/") + "/" + p.kind
		u.RawPath = ""
	}
	q := u.Query()
	q.Set("rid", s.rid)
	u.RawQuery = q.Encode()
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, u.String(), strings.NewReader(p.body))
	if err != nil {
		return errors.New("bad request")
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("User-Agent", "leaderrun-ping")
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return errors.New("no answer in time")
		}
		return scrub(err, s.base)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return errors.New("HTTP " + strconv.Itoa(resp.StatusCode))
	}
	return permanentError{resp.StatusCode}
}

// scrub removes the URL's secret parts from an error's text, should a
// lower layer have put them there (a redirect's target, a proxy's
// message).
func scrub(err error, u *url.URL) error {
	msg := err.Error()
	for _, secret := range []string{u.EscapedPath(), u.Path, u.RawQuery, u.User.String()} {
		if len(secret) > 1 {
			msg = strings.ReplaceAll(msg, secret, "…")
		}
	}
	return errors.New(msg)
}

// newRunID is a random UUID (version 4), the run id healthchecks.io pairs a
// start with its end by.
func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
