package storeurl

import (
	"net/url"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct{ rest, user, hosts, path, query string }{
		{"h:1", "", "h:1", "", ""},
		{"u:p/w@d@h1,h2/db/x?a=1&b=2", "u:p/w@d", "h1,h2", "/db/x", "a=1&b=2"},
		{"h?x=@y", "", "h", "", "x=@y"},
		{"", "", "", "", ""},
	} {
		u, h, p, q := Split(tc.rest)
		if u != tc.user || h != tc.hosts || p != tc.path || q != tc.query {
			t.Errorf("Split(%q) = %q %q %q %q", tc.rest, u, h, p, q)
		}
	}
}

func TestUserInfo(t *testing.T) {
	if u, p, has, err := UserInfo("us%40er:p%3Aw:d"); err != nil || u != "us@er" || p != "p:w:d" || !has {
		t.Errorf("UserInfo: %q %q %v %v", u, p, has, err)
	}
	if u, p, has, err := UserInfo("user"); err != nil || u != "user" || p != "" || has {
		t.Errorf("UserInfo(user): %q %q %v %v", u, p, has, err)
	}
	if _, _, _, err := UserInfo("u:S3cr3t%zz"); err == nil || strings.Contains(err.Error(), "S3cr3t") {
		t.Errorf("UserInfo(bad escape): %v", err)
	}
}

func TestKeysHostPortTLS(t *testing.T) {
	if got := SafeKey("db"); got != `"db"` {
		t.Errorf("SafeKey(db) = %s", got)
	}
	if got := SafeKey("p@ss"); got != Hidden {
		t.Errorf("SafeKey(p@ss) = %s", got)
	}
	if got := QueryKey("S3cr3tPassw0rd", "S3cr3tPassw0rd&db=1"); got != Hidden {
		t.Errorf("QueryKey without '=' = %s", got)
	}
	for h, want := range map[string]string{"h": "h:99", "h:1": "h:1", "[::1]": "[::1]:99", "::1": "", "h:0": "", "": ""} {
		got, err := HostPort(h, "99")
		if got != want || (err != nil) != (want == "") {
			t.Errorf("HostPort(%q) = %q, %v; want %q", h, got, err, want)
		}
	}
	if _, err := TLSConfig(url.Values{"cert": {"x"}}); err == nil {
		t.Error("TLSConfig: cert= without key= accepted")
	}
	if tc, err := TLSConfig(url.Values{"servername": {"s"}}); err != nil || tc.ServerName != "s" || tc.RootCAs != nil {
		t.Errorf("TLSConfig(servername): %+v, %v", tc, err)
	}
}

func TestQuery(t *testing.T) {
	if q, err := Query("a=1&b=2"); err != nil || q.Get("a") != "1" || q.Get("b") != "2" {
		t.Errorf("Query: %v, %v", q, err)
	}
	if _, err := Query("db=1&db=2"); err == nil || !strings.Contains(err.Error(), `"db" given 2 times`) {
		t.Errorf("Query(twice): %v", err)
	}
	if _, err := Query("S3cr3tPassw0rd&S3cr3tPassw0rd"); err == nil || strings.Contains(err.Error(), "S3cr3t") {
		t.Errorf("Query(secret twice): %v", err)
	}
	if _, err := Query("a=%zz"); err == nil || err.Error() != "bad query string" {
		t.Errorf("Query(bad escape): %v", err)
	}
}

func TestOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "first", 2: "second", 9: "ninth", 10: "10th", 11: "11th", 21: "21st", 22: "22nd", 113: "113th"} {
		if got := Ordinal(n); got != want {
			t.Errorf("Ordinal(%d) = %q; want %q", n, got, want)
		}
	}
}
