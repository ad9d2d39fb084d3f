package redislease

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// FuzzParseURL feeds parseURL a URL with a password in a credential
// position (":PASSWORD@") amid arbitrary text, for every scheme. It must
// never panic, every error must wrap lease.ErrConfig, and no error, no
// display string may contain the password. The env
// password (REDISCLI_AUTH) is checked the same way.
func FuzzParseURL(f *testing.F) {
	seeds := [][3]string{
		{"redis://u", "S3cr3tPassw0rd", "127.0.0.1:6379/0"},
		{"redis:/", "S3cr3tPassw0rd", "127.0.0.1:6379"},
		{"redis::/", "S3cr3tPassw0rd", "h"},
		{"redis", "S3cr3tPassw0rd", "h"},
		{"redis//u", "S3cr3tPassw0rd", "h"},
		{"rediss://u", "S3cr3tPassw0rd", "h:6380?servername=x"},
		{"redis+sentinel://", "S3cr3tPassw0rd", "s1,s2:26379/mymaster/2"},
		{"redis+cluster://u", "S3cr3tPassw0rd", "h1:7000,h2:7001"},
		{"unix://u", "S3cr3tPassw0rd", "/tmp/redis.sock?db=1"},
		{"redis://u", "S3cr3tPassw0rd", "h:99999"},
		{"redis://u", "S3cr3tPassw0rd", "h/x?db=1"},
		{"redis://u", "S3cr3tPassw0rd", "h?S3cr3t=1"},
		{"redis://u", "S3cr3tPassw0rd", "h:6379/notadb"},
		{"REDIS+CLUSTER://", "S3cr3tPassw0rd", "h/0"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], "")
	}
	f.Add("redis://", "S3cr3tPassw0rd", "h:6379", "Env0Passw0rdX")
	f.Fuzz(func(t *testing.T, before, pass, after, envPass string) {
		if !leasetest.SecretLike(pass) || strings.Contains(before, pass) || strings.Contains(after, pass) {
			return
		}
		getenv := func(k string) string {
			if k == EnvPassword || k == EnvSentinelPassword {
				return envPass
			}
			return ""
		}
		raw := before + ":" + pass + "@" + after
		c, err := parseURL(raw, getenv)
		out := ""
		if err != nil {
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("parseURL(%q) error %v does not wrap lease.ErrConfig", raw, err)
			}
			out = err.Error()
		} else {
			out = c.display
			for _, s := range []string{c.opts.Password, c.opts.SentinelPassword} {
				if s != "" && !slices.Contains(c.secrets, s) {
					t.Fatalf("parseURL(%q): password %q missing from secrets", raw, s)
				}
			}
		}
		// Another part of the output (a fixed message, an escaped user
		// name) might spell the string by chance: the same URL with another
		// password of the same shape tells.
		leasetest.NoSecret(t, fmt.Sprintf("parseURL(%q)", raw), out, pass, func(p string) string {
			return parseOutput(before+":"+p+"@"+after, getenv)
		})
		if leasetest.SecretLike(envPass) && strings.Contains(out, envPass) && !strings.Contains(raw, envPass) {
			t.Fatalf("parseURL(%q): output %q contains the environment password", raw, out)
		}
	})
}

// parseOutput is what parseURL shows of raw: its error or its display form.
func parseOutput(raw string, getenv func(string) string) string {
	c, err := parseURL(raw, getenv)
	if err != nil {
		return err.Error()
	}
	return c.display
}

// FuzzHolderOf checks the decoder of the Redis holder record: any value
// (a foreign or corrupt key included) decodes without panicking, and a
// record written the way acquire.lua writes it reads back field for field
// (a token at or above 2^53 reads as none).
func FuzzHolderOf(f *testing.F) {
	f.Add(`{"holder":"h:1","id":"0123456789abcdef0123456789abcdef","token":7,"since":"2026-01-02T03:04:05.123456Z","ttl_ms":3000}`, int64(2500), "h:1", uint64(7), int64(3000))
	f.Add(`{"holder":"h","token":1e+15}`, int64(-2), "host:42", uint64(999999999999999), int64(15000))
	f.Add(`not json`, int64(-1), "", uint64(0), int64(0))
	f.Add(`{"holder":"\u001b[31mred","token":-1}`, int64(0), "a\x1b[31m", uint64(1<<53), int64(1))
	f.Fuzz(func(t *testing.T, raw string, pttl int64, holder string, token uint64, ttlMS int64) {
		h := holderOf("job", raw, pttl)
		if h.Name != "job" {
			t.Fatalf("holderOf(%q) lost the name: %+v", raw, h)
		}
		if pttl > 0 && h.Remaining != time.Duration(pttl)*time.Millisecond || pttl <= 0 && h.Remaining != 0 {
			t.Fatalf("holderOf(_, %d) Remaining = %v", pttl, h.Remaining)
		}
		since := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
		// The record as acquire.lua writes it.
		b, err := json.Marshal(struct {
			Holder string `json:"holder"`
			ID     string `json:"id"`
			Token  uint64 `json:"token"`
			Since  string `json:"since"`
			TTLms  int64  `json:"ttl_ms"`
		}{holder, "0123456789abcdef0123456789abcdef", token, since.Format(time.RFC3339Nano), ttlMS})
		if err != nil {
			t.Fatal(err)
		}
		got := holderOf("job", string(b), 0)
		var want string // JSON has no invalid UTF-8: what a JSON round trip makes of holder
		hb, _ := json.Marshal(holder)
		_ = json.Unmarshal(hb, &want)
		wantToken := token
		if token >= 1<<53 {
			wantToken = 0 // not a token leaderrun mints: read as none
		}
		wantTTL := time.Duration(0)
		if ttlMS > 0 {
			wantTTL = time.Duration(ttlMS) * time.Millisecond
		}
		if got.Label != want || got.Token != wantToken || !got.Since.Equal(since) || got.TTL != wantTTL {
			t.Fatalf("holderOf(%s) = %+v, want holder %q token %d since %v ttl %v", b, got, want, wantToken, since, wantTTL)
		}
	})
}
