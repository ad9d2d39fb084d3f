package storeerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

func TestNewKeepsKindAndContextNotCause(t *testing.T) {
	cause := fmt.Errorf("vendor: %w", context.DeadlineExceeded)
	err := New("no answer in time", lease.ErrUnavailable, cause)
	if err.Error() != "no answer in time" {
		t.Errorf("message %q", err)
	}
	if !errors.Is(err, lease.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v: want ErrUnavailable and DeadlineExceeded", err)
	}
	if errors.Is(err, cause) || errors.Is(err, context.Canceled) {
		t.Errorf("%v: the vendor error or another context error is in the chain", err)
	}
	if err := New("x", nil, errors.New("y")); errors.Is(err, lease.ErrUnavailable) || errors.Is(err, lease.ErrConfig) {
		t.Errorf("%v: a nil kind is no sentinel", err)
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct {
		s       string
		secrets []string
		minLen  int
		want    string
	}{
		{"user:hunter2@h", []string{"hunter2"}, 0, "user:xxxxx@h"},
		{"a b", []string{"", "a"}, 1, "xxxxx b"},
		{"a b", []string{"a"}, 3, "a b"},
		{"pw pw", []string{"pw"}, 2, "xxxxx xxxxx"},
		// A password that is a common word masks only itself, never the
		// words it is part of.
		{"WRONGPASS invalid username-password pair", []string{"pass"}, 1, "WRONGPASS invalid username-password pair"},
		{"Redis is loading; auth Redis", []string{"Redis"}, 1, "xxxxx is loading; auth xxxxx"},
		{"passpass pass", []string{"pass"}, 1, "passpass xxxxx"},
		{"key=pass,", []string{"pass"}, 1, "key=xxxxx,"},
		// A secret that starts or ends with punctuation needs no boundary there.
		{"x!pw!y", []string{"!pw!"}, 1, "xxxxxxy"},
		{"héllo é", []string{"é"}, 1, "héllo xxxxx"},
		// Structurally, whatever the secrets: URL user info and credential
		// parameters.
		{"dial redis://u:zz@h:1 failed", nil, 1, "dial redis://xxxxx@h:1 failed"},
		{"host=h password=zz sslpassword='a b' sig=s%2F&x=1 AccountKey=k;", nil, 1, "host=h password=xxxxx sslpassword=xxxxx sig=xxxxx&x=1 AccountKey=xxxxx;"},
		{"password authentication failed for user \"u\"", []string{"pass"}, 1, "password authentication failed for user \"u\""},
	} {
		if got := Quote(tc.s, tc.secrets, tc.minLen); got != tc.want {
			t.Errorf("Quote(%q, %q, %d) = %q, want %q", tc.s, tc.secrets, tc.minLen, got, tc.want)
		}
	}
}

func TestConfigAndNetReason(t *testing.T) {
	err := Config("bad %s", "port")
	if err.Error() != "bad port" || !errors.Is(err, lease.ErrConfig) {
		t.Errorf("Config: %v", err)
	}
	if got := NetReason(fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED)); !strings.Contains(got, "refused") || strings.Contains(got, "127.0.0.1") {
		t.Errorf("NetReason(refused) = %q", got)
	}
	if got := NetReason(errors.New("other")); got != "" {
		t.Errorf("NetReason(other) = %q, want empty", got)
	}
}

// A host name that does not resolve is said plainly.
func TestNetReasonNoSuchHost(t *testing.T) {
	err := fmt.Errorf("dial: %w", &net.DNSError{Err: "no such host", Name: "redis.internl", IsNotFound: true})
	if got := NetReason(err); !strings.Contains(got, "the host name redis.internl does not resolve") {
		t.Fatalf("NetReason = %q", got)
	}
}
