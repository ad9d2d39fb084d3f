package leasetest

import (
	"os"
	"testing"
)

// RequireEnv returns the integration-test variable name (an address that
// scripts/test.sh exports after starting a real server on 127.0.0.1). When it
// is missing the test is skipped, except under CI (CI set), where a skipped
// integration test is a failure.
func RequireEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: run the tests with scripts/test.sh", name)
		}
		t.Skipf("%s is not set; scripts/test.sh starts the server", name)
	}
	return v
}
