// Command leaderrun-ping sends a run's --ping requests for leaderrun, which
// links no network code itself: leaderrun starts it only for a run with
// --ping. It reads on its standard input the URL, the bound in
// milliseconds, the format, the tail (--ping-output-tail: see tail.go),
// then one line per ping (pingwire: a kind
// "start", "ok", an exit code or "log", the run's duration and a body). It
// sends them in order, shaped as the format's service expects (request),
// with a random run id where the service pairs a start with its end by
// one, retrying with backoff. A start ping not
// delivered within a quarter of the bound after a later ping arrived is
// dropped, so that the end goes out in time. Once its input ends, it
// gives up after the bound and writes one line per ping on its standard
// output: "KIND ok", "KIND dropped" or "KIND failed: REASON", never the
// URL, whose path and query are secrets. It follows no redirect: a 3xx
// answer is a ping not delivered (see send). It is not meant to be run by
// hand.
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

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

func main() {
	// The run's end is worth telling even when leaderrun was told to stop:
	// systemd's stop signals the whole unit, a terminal's Ctrl-C the
	// foreground group. This program ends by itself within the bound once
	// its input ends, which leaderrun's exit (or death) ensures.
	// SIGPIPE too: with a tail, the copy of the child's output must go on
	// when leaderrun, the report's reader, is gone.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	os.Exit(run(os.Stdin, os.Stdout))
}

func run(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 4<<10), pingwire.MaxLine)
	base, bound, format, tail, msg := readHeader(sc)
	if msg != "" {
		fmt.Fprintln(out, "all failed: "+msg)
		return 2
	}
	tl := startTail(tail)
	// The report first, then the copy's end: leaderrun waits for the
	// report only.
	defer tl.wait()
	s := &sender{base: base, format: format, rid: newRunID(), client: &http.Client{CheckRedirect: noRedirect}, tail: tl, bound: bound}

	// all ends bound after the input does; start ends too when a later
	// ping arrives.
	all, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	start, dropStart := context.WithCancel(all)
	defer dropStart()
	queue := make(chan pingwire.Ping, 16)
	go func() { // ends with the input; the queue's reader below outlives it
		defer close(queue)
		for sc.Scan() {
			p := pingwire.ParsePing(sc.Text())
			if p.Kind != "start" {
				// A start still queued or in flight gets a quarter of the
				// bound more: a fast child's start is sent, one a server
				// sits on is given up for the end.
				time.AfterFunc(bound/4, dropStart)
			}
			queue <- p
		}
		time.AfterFunc(bound, cancelAll)
	}()
	var report []string
	for p := range queue {
		ctx := all
		if p.Kind == "start" {
			ctx = start
		}
		err := s.deliver(ctx, p)
		switch {
		case err == nil:
			report = append(report, p.Kind+" ok")
		case p.Kind == "start" && start.Err() != nil && all.Err() == nil:
			report = append(report, p.Kind+" dropped")
		default:
			report = append(report, p.Kind+" failed: "+err.Error())
		}
	}
	writeReport(out, report, tl, bound)
	return 0
}

// writeReport writes the report, once the copy's last chunk is through
// (within a quarter of bound): leaderrun writes its final line once it has
// the report, and on a stream the child shared, that line comes after the
// child's output. Then it closes out: leaderrun need not wait for the
// copy's end.
func writeReport(out io.Writer, report []string, tl *tailer, bound time.Duration) {
	tl.settle(bound / 4)
	fmt.Fprint(out, strings.Join(report, "\n")+"\n")
	if c, ok := out.(io.Closer); ok {
		c.Close()
	}
}

// sender sends pings to one check.
type sender struct {
	base   *url.URL
	format pingwire.Format
	rid    string
	client *http.Client
	tail   *tailer       // --ping-output-tail; nil: none
	bound  time.Duration // the bound after the input's end
}

// attemptTimeout bounds one request while the run goes on (a start ping);
// at the end, the bound left is the limit.
const attemptTimeout = 10 * time.Second

// deliver sends p, retrying with backoff (0.1s doubling to 5s) on network
// errors, 5xx and 429, until ctx ends; other answers are final.
func (s *sender) deliver(ctx context.Context, p pingwire.Ping) error {
	if s.tail != nil && pingwire.CarriesTail(p.Kind) {
		// A quarter of the bound for the output's last chunk: the
		// child's tree is gone when the end's ping comes.
		p.Body = s.tail.withTail(p.Body, s.format.BodyLimit(), s.bound/4)
	}
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
type permanentError struct {
	status int
	why    string // what the status means here, when it needs saying
}

func (e permanentError) Error() string {
	if e.why != "" {
		return "HTTP " + strconv.Itoa(e.status) + ", " + e.why
	}
	return "HTTP " + strconv.Itoa(e.status)
}

// readHeader reads the input's first four lines: the ping URL, the
// bound in milliseconds, the format and the tail. msg says why they are
// unusable, "" when they are not.
func readHeader(sc *bufio.Scanner) (base *url.URL, bound time.Duration, format pingwire.Format, tail pingwire.Tail, msg string) {
	if sc.Scan() {
		base, _ = url.Parse(sc.Text())
	} else if errors.Is(sc.Err(), bufio.ErrTooLong) {
		// leaderrun refuses such a URL before it starts this program.
		return nil, 0, "", tail, fmt.Sprintf("the URL is longer than %d bytes", pingwire.MaxURL)
	}
	if sc.Scan() {
		ms, _ := strconv.Atoi(sc.Text())
		bound = time.Duration(ms) * time.Millisecond
	}
	ok := false
	if sc.Scan() && sc.Text() != pingwire.Auto {
		format, ok = pingwire.ParseFormat(sc.Text(), base)
	}
	if ok {
		sc.Scan()
		tail, ok = pingwire.ParseTail(sc.Text())
	}
	if base == nil || bound <= 0 || !ok {
		return nil, 0, "", tail, "leaderrun-ping is started by leaderrun --ping, not by hand"
	}
	return base, bound, format, tail, ""
}

// noRedirect makes the client hand every redirect back as the answer. A
// ping follows none: a redirect to another origin would carry the check's
// secret there (net/http sends the URL as the Referer, and the path and
// query may be kept), and a 301, 302 or 303 turns the POST into a GET
// without its body, which the service might count as a ping with nothing
// in it. A same-origin 307 or 308 would be safe, but a ping URL that
// redirects is one to correct, so it is refused too, and said.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// send makes one request. Its error never holds the URL: net/http's
// *url.Error does, so only what it wraps is kept.
func (s *sender) send(ctx context.Context, p pingwire.Ping) error {
	method, u, body := s.request(p)
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	var rd io.Reader
	if method == http.MethodPost {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, u.String(), rd)
	if err != nil {
		return errors.New("bad request")
	}
	if rd != nil {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
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
	case resp.StatusCode < 400:
		return permanentError{resp.StatusCode, "a redirect" + redirectTarget(resp, s.base) + ", not followed: give --ping the URL it redirects to"}
	}
	return permanentError{resp.StatusCode, ""}
}

// redirectTarget says where a redirect points, by origin only (its path
// may hold a secret): " to ORIGIN" for another origin, " within the same
// origin", or "" when the answer names no usable Location.
func redirectTarget(resp *http.Response, base *url.URL) string {
	loc, err := resp.Location()
	if err != nil {
		return ""
	}
	if loc.Scheme == base.Scheme && loc.Host == base.Host {
		return " within the same origin"
	}
	return " to " + loc.Scheme + "://" + loc.Host
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
