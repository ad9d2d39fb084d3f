package bloblease

import (
	"regexp"
	"strings"
	"testing"
)

// TestNameChecksMatchAzureRules: accountName and containerName accept
// exactly what Azure's naming rules, written as regular expressions, do,
// over every string of up to six bytes from an alphabet with each kind of
// byte in it, and at the length bounds.
func TestNameChecksMatchAzureRules(t *testing.T) {
	account := regexp.MustCompile(`^[a-z0-9]{3,24}$`)
	container := regexp.MustCompile(`^[a-z0-9](?:-?[a-z0-9])*$`) // and 3-63 bytes
	check := func(s string) {
		if got, want := accountName(s), account.MatchString(s); got != want {
			t.Fatalf("accountName(%q) = %v; want %v", s, got, want)
		}
		if got, want := containerName(s), len(s) >= 3 && len(s) <= 63 && container.MatchString(s); got != want {
			t.Fatalf("containerName(%q) = %v; want %v", s, got, want)
		}
	}
	var all func(prefix string, n int)
	all = func(prefix string, n int) {
		check(prefix)
		if n == 0 {
			return
		}
		for _, c := range "ab-0Z_" {
			all(prefix+string(c), n-1)
		}
	}
	all("", 6)
	for _, n := range []int{23, 24, 25, 62, 63, 64} {
		check(strings.Repeat("a", n))
		check(strings.Repeat("a-", n/2) + "a")
	}
}
