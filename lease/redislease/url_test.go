package redislease

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/redis/go-redis/v9"
)

func TestParseURL(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	none := env(nil)
	for _, tc := range []struct {
		name, url  string
		getenv     func(string) string
		topo       Topology
		addrs      []string
		db         int
		user, pass string
		master     string
		sentUser   string
		sentPass   string
		tls        bool
		display    string
	}{
		{name: "Plain", url: "redis://h", addrs: []string{"h:6379"}, display: "redis://h:6379"},
		{name: "PortDB", url: "redis://h:7000/3", addrs: []string{"h:7000"}, db: 3},
		{name: "TrailingSlash", url: "redis://h:7000/", addrs: []string{"h:7000"}},
		{name: "DBQuery", url: "redis://h?db=2", addrs: []string{"h:6379"}, db: 2},
		{name: "IPv6", url: "redis://[::1]:6380", addrs: []string{"[::1]:6380"}},
		{name: "IPv6NoPort", url: "redis://[::1]", addrs: []string{"[::1]:6379"}},
		{name: "UserPass", url: "redis://alice:p%3Fw@h/1", addrs: []string{"h:6379"}, db: 1, user: "alice", pass: "p?w", display: "redis://alice:xxxxx@h:6379"},
		{name: "RawSpecialPass", url: "redis://:a/b@c:d@h", addrs: []string{"h:6379"}, pass: "a/b@c:d", display: "redis://:xxxxx@h:6379"},
		{name: "EnvPass", url: "redis://bob@h", getenv: env(map[string]string{"REDISCLI_AUTH": "fromenv"}), addrs: []string{"h:6379"}, user: "bob", pass: "fromenv"},
		{name: "URLPassBeatsEnv", url: "redis://:u@h", getenv: env(map[string]string{"REDISCLI_AUTH": "fromenv"}), addrs: []string{"h:6379"}, pass: "u"},
		{name: "TLS", url: "rediss://h:6380?servername=redis.example", addrs: []string{"h:6380"}, tls: true},
		{name: "Unix", url: "unix:///run/redis/redis.sock?db=4", addrs: []string{"/run/redis/redis.sock"}, db: 4, display: "unix:///run/redis/redis.sock"},
		{name: "UnixAuth", url: "unix://u:pw9@/tmp/r.sock", addrs: []string{"/tmp/r.sock"}, user: "u", pass: "pw9"},
		{name: "Sentinel", url: "redis+sentinel://s1,s2:26380/mymaster/2", topo: Sentinel, addrs: []string{"s1:26379", "s2:26380"}, master: "mymaster", db: 2, display: "redis+sentinel://s1:26379,s2:26380/mymaster"},
		{name: "SentinelAuth", url: "redis+sentinel://:mp@s1/m?sentinel_user=sen", getenv: env(map[string]string{"LEADERRUN_REDIS_SENTINEL_PASSWORD": "sp"}),
			topo: Sentinel, addrs: []string{"s1:26379"}, master: "m", pass: "mp", sentUser: "sen", sentPass: "sp"},
		{name: "SentinelTLS", url: "rediss+sentinel://s1/m", topo: Sentinel, addrs: []string{"s1:26379"}, master: "m", tls: true},
		{name: "Cluster", url: "redis+cluster://a:7000,b:7001,c:7002", topo: Cluster, addrs: []string{"a:7000", "b:7001", "c:7002"}},
		{name: "ClusterOneSeed", url: "REDIS+CLUSTER://a:7000/", topo: Cluster, addrs: []string{"a:7000"}},
		{name: "ClusterTLS", url: "rediss+cluster://:pw@a:7000,b:7001", topo: Cluster, addrs: []string{"a:7000", "b:7001"}, pass: "pw", tls: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.getenv == nil {
				tc.getenv = none
			}
			if tc.topo == "" {
				tc.topo = Single
			}
			c, err := parseURL(tc.url, tc.getenv)
			if err != nil {
				t.Fatalf("parseURL(%q): %v", tc.url, err)
			}
			o := c.opts
			if c.topo != tc.topo || !reflect.DeepEqual(o.Addrs, tc.addrs) || o.DB != tc.db ||
				o.Username != tc.user || o.Password != tc.pass || o.MasterName != tc.master ||
				o.SentinelUsername != tc.sentUser || o.SentinelPassword != tc.sentPass ||
				(o.TLSConfig != nil) != tc.tls || o.IsClusterMode != (tc.topo == Cluster) {
				t.Fatalf("parseURL(%q) = topo %s %+v", tc.url, c.topo, o)
			}
			if tc.display != "" && c.display != tc.display {
				t.Fatalf("display = %q; want %q", c.display, tc.display)
			}
			if tc.pass != "" && strings.Contains(c.display, tc.pass) {
				t.Fatalf("display %q shows the password", c.display)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	const pw = "Hunter2pw"
	for _, url := range []string{
		"h:6379",
		"http://h",
		"redis://",
		"redis://:" + pw + "@",
		"redis://:" + pw + "@h:notaport",
		"redis://:" + pw + "@h:0",
		"redis://:" + pw + "@h:99999",
		"redis://:" + pw + "@h/notadb",
		"redis://:" + pw + "@h/1/2",
		"redis://:" + pw + "@h/1?db=2",
		"redis://:" + pw + "@a,b",
		"redis://:" + pw + "@h?ca=/x",
		"redis://:" + pw + "@h?bogus=1",
		"redis://:" + pw + "@h?db=1&db=2",
		"redis://:" + pw + "@h#frag",
		"redis://:%zz" + pw + "@h",
		"redis://:Hunter2?pw@h",          // unencoded '?' in the password
		"redis://:Hunter2/pw@h:bad",      // '/' in the password and a bad port
		"redis://u:" + pw + "@h:Hunter2", // a port that looks like the password
		"unix://h/sock",
		"unix://",
		"unix:///",
		"redis+sentinel://:" + pw + "@s1",
		"redis+sentinel://:" + pw + "@s1/m/x",
		"redis+sentinel://:" + pw + "@s1/m/1/2",
		"redis+sentinel://:" + pw + "@s1?db=1",
		"redis+cluster://:" + pw + "@a,b/1",
		"redis+cluster://:" + pw + "@a?db=1",
		"redis+cluster://:" + pw + "@a?sentinel_user=x",
		"rediss://:" + pw + "@h?ca=/nonexistent/ca.pem",
		"rediss://:" + pw + "@h?cert=/nonexistent/c.pem",
	} {
		t.Run(url, func(t *testing.T) {
			c, err := parseURL(url, func(string) string { return "" })
			if err == nil {
				t.Fatalf("parseURL(%q) = %+v; want an error", url, c.opts)
			}
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			for _, frag := range []string{pw, "Hunter2"} {
				if strings.Contains(err.Error(), frag) {
					t.Fatalf("error %q contains the password", err)
				}
			}
		})
	}
}

// fakeRedisErr is a server error reply as go-redis reports it.
type fakeRedisErr string

func (e fakeRedisErr) Error() string { return string(e) }
func (fakeRedisErr) RedisError()     {}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error // nil: neither sentinel
	}{
		{"Canceled", context.Canceled, lease.ErrUnavailable},
		{"Deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), lease.ErrUnavailable},
		{"NetTimeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, lease.ErrUnavailable},
		{"Refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errors.New("connection refused"))}, lease.ErrUnavailable},
		{"EOF", io.EOF, lease.ErrUnavailable},
		{"PoolTimeout", redis.ErrPoolTimeout, lease.ErrUnavailable},
		{"Loading", fakeRedisErr("LOADING Redis is loading the dataset in memory"), lease.ErrUnavailable},
		{"ReadOnly", fakeRedisErr("READONLY You can't write against a read only replica."), lease.ErrUnavailable},
		{"ClusterDown", fakeRedisErr("CLUSTERDOWN The cluster is down"), lease.ErrUnavailable},
		{"TryAgain", fakeRedisErr("TRYAGAIN Multiple keys request during rehashing of slot"), lease.ErrUnavailable},
		{"MasterDown", fakeRedisErr("MASTERDOWN Link with MASTER is down"), lease.ErrUnavailable},
		{"Busy", fakeRedisErr("BUSY Redis is busy running a script."), lease.ErrUnavailable},
		{"OOM", fakeRedisErr("OOM command not allowed when used memory > 'maxmemory'."), lease.ErrUnavailable},
		{"MaxClients", fakeRedisErr("ERR max number of clients reached"), lease.ErrUnavailable},
		{"Moved", fakeRedisErr("MOVED 3999 127.0.0.1:6381"), lease.ErrUnavailable},
		{"NoAuth", fakeRedisErr("NOAUTH Authentication required."), lease.ErrConfig},
		{"WrongPass", fakeRedisErr("WRONGPASS invalid username-password pair or user is disabled."), lease.ErrConfig},
		{"NoPerm", fakeRedisErr("NOPERM this user has no permissions to run the 'evalsha' command"), lease.ErrConfig},
		{"OldAuth", fakeRedisErr("ERR invalid password"), lease.ErrConfig},
		{"WrongType", fakeRedisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), lease.ErrConfig},
		{"UnknownCA", fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}), lease.ErrConfig},
		{"UnknownReply", fakeRedisErr("ERR something new"), nil},
		{"Closed", redis.ErrClosed, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify("Redis at h:1", "op", tc.err, nil)
			for _, s := range []error{lease.ErrUnavailable, lease.ErrConfig, lease.ErrLost, lease.ErrNotHeld} {
				if errors.Is(got, s) != (s == tc.want) {
					t.Fatalf("classify(%v) = %v; want it to wrap %v only", tc.err, got, tc.want)
				}
			}
			if errors.Is(tc.err, context.Canceled) && !errors.Is(got, context.Canceled) {
				t.Fatalf("classify lost context.Canceled: %v", got)
			}
		})
	}
	if got := classify("Redis at h:1", "op", errors.New("dial 10.0.0.1: auth topsecret refused"), []string{"topsecret"}); strings.Contains(got.Error(), "topsecret") {
		t.Fatalf("classify kept a secret: %v", got)
	}
}

// TestHolderOf: each field of a record decodes on its own, so a token that an
// older version wrote through cjson (1e+15) or a hand-written one does not
// hide the holder; only exact integers below 2^53 are tokens.
func TestHolderOf(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		holder string
		token  uint64
	}{
		{`{"holder":"a:1","id":"x","token":9007199254740991,"since":"2026-01-02T03:04:05Z","ttl_ms":5000}`, "a:1", 1<<53 - 1},
		{`{"holder":"a:1","token":1e+15,"ttl_ms":5000}`, "a:1", 0},
		{`{"holder":"a:1","token":"123"}`, "a:1", 123},
		{`{"holder":"a:1","token":9007199254740992}`, "a:1", 0},
		{`{"holder":"a:1","token":18446744073709551615}`, "a:1", 0},
		{`{"holder":"a:1","token":-3}`, "a:1", 0},
		{`{"holder":7,"token":5}`, "", 5},
		{`not json`, "", 0},
	} {
		h := holderOf("n", tc.raw, 100)
		if h.Label != tc.holder || h.Token != tc.token || h.Name != "n" || h.Remaining != 100*time.Millisecond {
			t.Errorf("holderOf(%s) = %+v; want holder %q token %d", tc.raw, h, tc.holder, tc.token)
		}
	}
}
