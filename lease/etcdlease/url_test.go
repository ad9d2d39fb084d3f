package etcdlease

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

func TestParseURL(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name, url  string
		getenv     func(string) string
		endpoints  []string
		prefix     string
		user, pass string
		tls        bool
		display    string
	}{
		{name: "Plain", url: "etcd://h", endpoints: []string{"h:2379"}, display: "etcd://h:2379"},
		{name: "Port", url: "etcd://h:2380", endpoints: []string{"h:2380"}},
		{name: "Several", url: "etcd://a:1,b,c:3", endpoints: []string{"a:1", "b:2379", "c:3"}, display: "etcd://a:1,b:2379,c:3"},
		{name: "IPv6", url: "etcd://[::1]:2379,[::1]", endpoints: []string{"[::1]:2379", "[::1]:2379"}},
		{name: "Prefix", url: "etcd://h/jobs/prod", endpoints: []string{"h:2379"}, prefix: "jobs/prod/", display: "etcd://h:2379/jobs/prod"},
		{name: "PrefixSlash", url: "etcd://h/jobs/", endpoints: []string{"h:2379"}, prefix: "jobs/"},
		{name: "RootPath", url: "etcd://h/", endpoints: []string{"h:2379"}},
		{name: "UserPass", url: "etcd://alice:p%3Fw@h", endpoints: []string{"h:2379"}, user: "alice", pass: "p?w", display: "etcd://alice:xxxxx@h:2379"},
		{name: "RawSpecialPass", url: "etcd://bob:a/b@c:d@h:1/x", endpoints: []string{"h:1"}, user: "bob", pass: "a/b@c:d", prefix: "x/", display: "etcd://bob:xxxxx@h:1/x"},
		{name: "UserEnvPass", url: "etcd://bob@h", getenv: env(map[string]string{"ETCDCTL_PASSWORD": "fromenv"}), endpoints: []string{"h:2379"}, user: "bob", pass: "fromenv"},
		{name: "EnvUser", url: "etcd://h", getenv: env(map[string]string{"ETCDCTL_USER": "carol:pw:with:colons"}), endpoints: []string{"h:2379"}, user: "carol", pass: "pw:with:colons", display: "etcd://h:2379"},
		{name: "EnvUserEnvPass", url: "etcd://h", getenv: env(map[string]string{"ETCDCTL_USER": "dave", "ETCDCTL_PASSWORD": "pw"}), endpoints: []string{"h:2379"}, user: "dave", pass: "pw"},
		{name: "URLBeatsEnv", url: "etcd://u:p@h", getenv: env(map[string]string{"ETCDCTL_USER": "x:y"}), endpoints: []string{"h:2379"}, user: "u", pass: "p"},
		{name: "TLS", url: "ETCDS://h:2379?servername=etcd.example", endpoints: []string{"h:2379"}, tls: true, display: "etcds://h:2379"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := tc.getenv
			if getenv == nil {
				getenv = env(nil)
			}
			c, err := parseURL(tc.url, getenv)
			if err != nil {
				t.Fatalf("parseURL(%q): %v", tc.url, err)
			}
			prefix := tc.prefix
			if prefix == "" {
				prefix = DefaultPrefix
			}
			if !reflect.DeepEqual(c.endpoints, tc.endpoints) || c.prefix != prefix || c.user != tc.user || c.pass != tc.pass || (c.tls != nil) != tc.tls {
				t.Fatalf("parseURL(%q) = endpoints %v prefix %q user %q pass %q tls %v", tc.url, c.endpoints, c.prefix, c.user, c.pass, c.tls != nil)
			}
			if tc.display != "" && c.display != tc.display {
				t.Fatalf("display %q; want %q", c.display, tc.display)
			}
			if tc.pass != "" && (strings.Contains(c.display, tc.pass) || strings.Contains(c.where, tc.pass) || !slices.Contains(c.secrets, tc.pass)) {
				t.Fatalf("display %q / where %q / secrets %v: password mishandled", c.display, c.where, c.secrets)
			}
			if tc.tls && c.tls.ServerName != "etcd.example" {
				t.Fatalf("servername %q", c.tls.ServerName)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	const pw = "Sup3rSecretPw"
	for _, tc := range []struct{ name, url, want string }{
		{"NoScheme", "h:2379", "want scheme://"},
		{"Scheme", "etcdx://h", `unknown scheme "etcdx"`},
		{"NoHost", "etcd://", "missing host"},
		{"EmptyHost", "etcd://a,,b", "the second host"},
		{"BadPort", "etcd://h:99999", "the first host is not HOST[:PORT]"},
		{"PasswordAsPort", "etcd://u:" + pw, "the first host is not HOST[:PORT]"},
		{"PasswordInPath", "etcd://h/x:" + pw, "bad key prefix"},
		{"PasswordInScheme", "etcd:" + pw + "@h://x", "unknown scheme (not shown)"},
		{"DotPrefix", "etcd://h/a/../b", "bad key prefix"},
		{"Fragment", "etcd://h#" + pw, "fragment"},
		{"UnknownQuery", "etcd://h?x=1", `unknown query parameter "x"`},
		{"QueryNoValue", "etcd://h?" + pw, "unknown query parameter (not shown)"},
		{"TLSOptionPlain", "etcd://h?ca=/x", "needs TLS"},
		{"Twice", "etcds://h?ca=a&ca=b", "given 2 times"},
		{"CertWithoutKey", "etcds://h?cert=/x", "cert= and key= go together"},
		{"MissingCA", "etcds://h?ca=/nonexistent/ca.pem", "ca="},
		{"PassWithoutUser", "etcd://:" + pw + "@h", "without a user name"},
		{"UserWithoutPass", "etcd://bob@h", "without a password"},
		{"BadEscape", "etcd://u:%zz" + pw + "@h", "percent-encoding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseURL(tc.url, func(string) string { return "" })
			if err == nil {
				t.Fatalf("parseURL(%q) succeeded", tc.url)
			}
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q; want it to say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "Sup3r") {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
	// ETCDCTL_USER problems are reported without its value.
	for _, v := range []string{":" + pw, "onlyuser"} {
		_, err := parseURL("etcd://h", func(k string) string {
			if k == EnvUser {
				return v
			}
			return ""
		})
		if !errors.Is(err, lease.ErrConfig) || strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "onlyuser") {
			t.Fatalf("ETCDCTL_USER=%q: %v", v, err)
		}
	}
}
