package gcslease_test

import (
	"os"
	"testing"
)

// TestMain keeps Google's credential search on this host: a test that
// reached Application Default Credentials by mistake would otherwise ask
// the metadata server's address (169.254.169.254) whether it runs on
// Google Cloud. A credentials file that is not there ends the search at
// once, and the metadata server, if asked anyway, is a closed port here.
func TestMain(m *testing.M) {
	os.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/leaderrun-test-key.json")
	os.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
	os.Exit(m.Run())
}
