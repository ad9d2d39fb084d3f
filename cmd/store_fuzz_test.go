package cmd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/internal/redact"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// errDispatched is what the stand-in openers of FuzzOpenStore return: the
// URL got past cmd's own checks to the store package (whose URL parsers
// have their own fuzz targets).
var errDispatched = errors.New("dispatched")

// FuzzOpenStore checks the store selection by URL scheme: a URL with a
// password in a credential position (":PASSWORD@") amid arbitrary text
// either reaches the opener registered for its scheme (compared without
// case) or is refused with an error wrapping lease.ErrConfig that does not
// contain the password. redactURL must hide the password
// too, since every cmd message about a URL goes through it.
func FuzzOpenStore(f *testing.F) {
	for _, s := range [][2]string{
		{"redis://u", "127.0.0.1:6379"},
		{"REDIS+CLUSTER://", "h:7000"},
		{"file://u", "localhost/tmp/x"},
		{"azblob+http://", "127.0.0.1:10000/devstoreaccount1/c"},
		{"memcached://u", "h"},
		{"redis//u", "h"},
		{"redis:", "h"},
		{"redis:/", "h:6379"},
		{"redis:://u", "h"},
		{"", "h"},
	} {
		f.Add(s[0], "S3cr3tPassw0rd", s[1])
	}
	f.Fuzz(func(t *testing.T, before, pass, after string) {
		if !leasetest.SecretLike(pass) || strings.Contains(before, pass) || strings.Contains(after, pass) {
			return
		}
		saved := storeOpeners
		t.Cleanup(func() { storeOpeners = saved })
		var got string
		storeOpeners = map[string]opener{}
		for scheme := range saved {
			storeOpeners[scheme] = func(context.Context, string, lease.FlagSpeller, lease.OpenOptions) (lease.Store, error) {
				got = scheme
				return nil, errDispatched
			}
		}
		raw := before + ":" + pass + "@" + after
		other := strings.Repeat("Q", len(pass))
		if other == pass {
			other = strings.Repeat("Z", len(pass))
		}
		_, err := openStore(context.Background(), raw, lease.DashFlag, lease.OpenOptions{})
		scheme, _, hasSep := strings.Cut(raw, "://")
		_, registered := saved[strings.ToLower(scheme)]
		switch {
		case errors.Is(err, errDispatched):
			if !hasSep || got != strings.ToLower(scheme) {
				t.Fatalf("openStore(%q) went to the %q opener", raw, got)
			}
		case err == nil:
			t.Fatalf("openStore(%q) returned no error from a stand-in opener", raw)
		default:
			if hasSep && registered {
				t.Fatalf("openStore(%q) refused a registered scheme: %v", raw, err)
			}
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("openStore(%q) error %v does not wrap lease.ErrConfig", raw, err)
			}
			// Another part of the message (an escaped character) might
			// spell the string by chance: the same URL with another
			// password of the same shape tells.
			_, err2 := openStore(context.Background(), before+":"+other+"@"+after, lease.DashFlag, lease.OpenOptions{})
			if strings.Contains(err.Error(), pass) && (err2 == nil || !strings.Contains(err2.Error(), pass)) {
				t.Fatalf("openStore(%q): error %q contains the password", raw, err)
			}
		}
		if r := redact.URL(raw); strings.Contains(r, pass) && !strings.Contains(redact.URL(before+":"+other+"@"+after), pass) {
			t.Fatalf("redact.URL(%q) = %q contains the password", raw, r)
		}
	})
}

// FuzzFileStoreURL checks the file:// opener on URLs whose path lies inside
// a temporary directory (an accepted URL creates its directory): it never
// panics, refusals wrap lease.ErrConfig, and an accepted store's directory
// is the URL's path, absolute.
func FuzzFileStoreURL(f *testing.F) {
	for _, s := range [][3]string{
		{"", "/a", ""}, {"localhost", "/a/b", ""}, {"host", "/a", ""}, {"", "/a", "?x=1"},
		{"", "/a", "#frag"}, {"", "/%zz", ""}, {"", "/a%20b", ""}, {"u:S3cr3tPassw0rd@", "/a", ""},
		{"[::1]", "/a", ""}, {"", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, host, path, tail string) {
		if strings.Contains(path+tail, "..") || strings.ContainsAny(host, "/\\") {
			return // would leave the temporary directory
		}
		raw := "file://" + host + t.TempDir() + path + tail
		s, err := openFileStore(context.Background(), raw, lease.DashFlag, lease.OpenOptions{})
		if err != nil {
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("openFileStore(%q) error %v does not wrap lease.ErrConfig", raw, err)
			}
			return
		}
		defer s.Close()
	})
}
