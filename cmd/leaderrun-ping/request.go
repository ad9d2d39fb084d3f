package main

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

// request is the method, URL and body of ping p in s's format. Every
// format keeps the query the user's URL has (an Uptime Kuma push URL is
// copied with ?status=up&msg=OK&ping=), setting only its own parameters.
// A GET carries no body: body is then "".
func (s *sender) request(p pingwire.Ping) (method string, u url.URL, body string) {
	u = *s.base
	q := u.Query()
	switch s.format {
	case pingwire.Kuma:
		// No start or log event; the end's status, message and the run's
		// duration in ms as the "ping" (response time) Kuma charts.
		status := "down"
		if p.Kind == "ok" {
			status = "up"
		}
		q.Set("status", status)
		q.Set("msg", p.Body)
		q.Set("ping", strconv.FormatInt(p.Took.Milliseconds(), 10))
		method = http.MethodGet
	case pingwire.Cronitor:
		q.Set("series", s.rid)
		switch p.Kind {
		case "start":
			q.Set("state", "run")
		default:
			q.Set("state", "fail")
			code := p.Kind
			if p.Kind == "ok" {
				q.Set("state", "complete")
				code = "0"
			}
			q.Set("status_code", code)
			q.Set("metric", "duration:"+strconv.FormatFloat(p.Took.Seconds(), 'f', 3, 64))
			q.Set("message", p.Body)
		}
		method = http.MethodGet
	case pingwire.BetterStack:
		// No start or log event; the exit code in the path, as for
		// healthchecks.io, and no run id.
		if p.Kind != "ok" {
			appendPath(&u, p.Kind)
		}
		method, body = http.MethodPost, p.Body
	default: // pingwire.Healthchecks
		if p.Kind != "ok" {
			appendPath(&u, p.Kind)
		}
		q.Set("rid", s.rid)
		method, body = http.MethodPost, p.Body
	}
	u.RawQuery = q.Encode()
	return method, u, body
}

// appendPath adds "/"+seg to u's path.
func appendPath(u *url.URL, seg string) {
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + seg
	u.RawPath = ""
}
