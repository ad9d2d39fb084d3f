package leasetest

import (
	"strings"
	"testing"
)

// SecretLike reports whether s is worth checking for in output when a fuzz
// target plants it as a password, key or signature: long enough (8 to 128
// bytes) that it cannot appear by chance in a fixed message, and
// alphanumeric, so swapping it for another string of the same kind keeps a
// URL's or connection string's shape.
func SecretLike(s string) bool {
	if len(s) < 8 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// OtherSecret returns a string of the same shape as secret (SecretLike
// keeps holding), and different from it.
func OtherSecret(secret string) string {
	if strings.Trim(secret, "Q") == "" {
		return strings.Repeat("Z", len(secret))
	}
	return strings.Repeat("Q", len(secret))
}

// NoSecret fails t when out, what a parser showed of input (its error or
// its display form), contains secret, unless a fixed part of the output
// spells it by chance: render(s) is what the same input with secret
// replaced by s shows, and it is asked for OtherSecret(secret). what names
// the call for the message ("parseURL(…)").
func NoSecret(t testing.TB, what, out, secret string, render func(s string) string) {
	t.Helper()
	if strings.Contains(out, secret) && !strings.Contains(render(OtherSecret(secret)), secret) {
		t.Fatalf("%s: output %q contains the password", what, out)
	}
}
