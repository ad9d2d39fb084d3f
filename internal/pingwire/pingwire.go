// Package pingwire holds what leaderrun and leaderrun-ping (which sends
// --ping's requests) must agree on about the pipe between them, so that
// neither can change it alone: the input's lines, and the ping formats
// (which service's conventions a ping follows). It links no network code.
//
// The input is the URL, the bound in milliseconds, the format and the
// tail (Tail's Line), one line each, then one line per ping: Ping's Line.
package pingwire

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxLine is the longest line leaderrun-ping reads on its standard input:
// the URL, then each ping's kind and body.
const MaxLine = 64 << 10

// MaxURL is the longest --ping URL leaderrun accepts: a line of MaxLine
// bytes with its newline.
const MaxURL = MaxLine - 1

// Format is the conventions of the service a ping URL belongs to.
type Format string

// The formats --ping-format names.
const (
	// Healthchecks is healthchecks.io's: POST URL/start, URL, URL/CODE,
	// URL/log, each with ?rid=RUN-ID.
	Healthchecks Format = "hc"
	// Kuma is Uptime Kuma's push monitor: GET URL?status=up|down&msg=…&ping=MS
	// at the end only (a push monitor has no start).
	Kuma Format = "kuma"
	// Cronitor is Cronitor's telemetry API: GET URL?state=run|complete|fail
	// with series, status_code, metric=duration:SECONDS and message.
	Cronitor Format = "cronitor"
	// BetterStack is Better Stack's heartbeat: POST URL or URL/CODE at the
	// end only, the body shown with a failure.
	BetterStack Format = "betterstack"
)

// Formats are the formats, in the order help lists them.
var Formats = []Format{Healthchecks, Kuma, Cronitor, BetterStack}

// Auto is --ping-format's default: the format the URL's shape names
// (Detect).
const Auto = "auto"

// ParseFormat returns the format s names (Auto resolved by Detect(u)), and
// false when s names none.
func ParseFormat(s string, u *url.URL) (Format, bool) {
	if s == Auto {
		return Detect(u), true
	}
	for _, f := range Formats {
		if string(f) == s {
			return f, true
		}
	}
	return "", false
}

// Detect returns the format u's shape names where that is unambiguous: a
// hosted service's own host, or Uptime Kuma's push path (/api/push/TOKEN,
// the same on every self-hosted instance). Anything else is Healthchecks,
// whose conventions most such services share.
func Detect(u *url.URL) Format {
	host := strings.ToLower(u.Hostname())
	switch {
	case host == "cronitor.link":
		return Cronitor
	case (host == "uptime.betterstack.com" || host == "betteruptime.com") && strings.HasPrefix(u.Path, "/api/v1/heartbeat/"):
		return BetterStack
	case strings.HasPrefix(u.Path, "/api/push/") && strings.Count(u.Path, "/") == 3:
		return Kuma
	}
	return Healthchecks
}

// BodyLimit is the most bytes of a ping's body (Ping.Body, and the tail of
// the output after it) f's service keeps, as its docs give it:
// healthchecks.io logs the first 100 kB of a POST's body; Cronitor's
// message is up to 2000 characters; Uptime Kuma's msg, in the query too,
// is held to the same, so that the request line stays within 8 KB once
// encoded (the common default of proxies); Better Stack documents no limit
// and gets healthchecks.io's.
func (f Format) BodyLimit() int {
	if f == Cronitor || f == Kuma {
		return 2000
	}
	return MaxTail
}

// MaxTail is the most --ping-output-tail keeps: healthchecks.io's limit.
const MaxTail = 100000

// HasStart reports whether f has an event for a run's start.
func (f Format) HasStart() bool { return f == Healthchecks || f == Cronitor }

// HasLog reports whether f has an event that records a line without
// changing the check's state (--ping-skipped).
func (f Format) HasLog() bool { return f == Healthchecks }

// Ping is one ping on the pipe.
type Ping struct {
	// Kind is "start", "ok", an exit code (decimal) or "log".
	Kind string
	// Took is how long the child ran, for an end ping; 0 otherwise.
	Took time.Duration
	// Body is one line: leaderrun's final line, or the skipped reason.
	Body string
}

// Line is p as a line of the pipe, with its newline: KIND, a tab, the
// duration in milliseconds, a tab, BODY.
func (p Ping) Line() string {
	return p.Kind + "\t" + strconv.FormatInt(p.Took.Milliseconds(), 10) + "\t" + p.Body + "\n"
}

// ParsePing reads a line made by Line (without its newline).
func ParsePing(line string) Ping {
	kind, rest, _ := strings.Cut(line, "\t")
	ms, body, _ := strings.Cut(rest, "\t")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return Ping{Kind: kind, Took: time.Duration(n) * time.Millisecond, Body: body}
}

// Tail is what leaderrun-ping is told about --ping-output-tail: how many of
// the last bytes of the child's output to keep, and which streams come
// through it. Each stream comes as two descriptors, from 3 on: the read end
// of the pipe the child writes to, then the descriptor the output goes on
// to (where it would have gone without the tail).
type Tail struct {
	// Bytes is how many of the last bytes are kept; 0: no tail.
	Bytes int
	// Streams are the pipes, in descriptor order: "out", "err", or
	// "out+err" for one pipe both write to (they went to one place).
	// A stream that is a terminal is not among them.
	Streams []string
}

// Line is t as the input's fourth line, with its newline: BYTES, then the
// streams, separated by spaces.
func (t Tail) Line() string {
	return strings.Join(append([]string{strconv.Itoa(t.Bytes)}, t.Streams...), " ") + "\n"
}

// ParseTail reads a line made by Line (without its newline); false when it
// is not one.
func ParseTail(line string) (Tail, bool) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Tail{}, false
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 || n > MaxTail {
		return Tail{}, false
	}
	for _, s := range f[1:] {
		if s != "out" && s != "err" && s != "out+err" {
			return Tail{}, false
		}
	}
	return Tail{Bytes: n, Streams: f[1:]}, true
}

// CarriesTail reports whether a ping of kind carries the tail: the end of
// a run that failed (an exit code), not a start, a success or a log line.
func CarriesTail(kind string) bool {
	return kind != "start" && kind != "ok" && kind != "log"
}
