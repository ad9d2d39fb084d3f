package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A TLS file parameter that names a FIFO (whose open would block forever,
// deaf to signals) or a device without end (/dev/zero) is a configuration
// error: one line, exit 125, no child, before any connection is tried. The
// stores never contacted here need no server: the port is never dialled.
func TestTLSFileNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct{ store, param string }{
		{"rediss://127.0.0.1:1", "ca"},
		{"rediss://127.0.0.1:1", "cert"},
		{"etcds://127.0.0.1:1", "ca"},
		{"etcds://127.0.0.1:1", "key"},
		{"postgres://u@127.0.0.1:1/db?sslmode=verify-full", "sslrootcert"},
		{"postgres://u@127.0.0.1:1/db?sslmode=verify-full", "sslcert"},
	} {
		for _, file := range []string{fifo, "/dev/zero"} {
			sep := "?"
			if strings.Contains(tc.store, "?") {
				sep = "&"
			}
			url := tc.store + sep + tc.param + "=" + file
			if tc.param == "cert" {
				url += "&key=" + file
			}
			if tc.param == "key" {
				url += "&cert=" + file
			}
			if tc.param == "sslcert" {
				url += "&sslkey=" + file
			}
			t.Run(tc.param+"="+filepath.Base(file), func(t *testing.T) {
				code, stderr := runLR(t, nil, "--store", url, "--wait", "0", "--", "touch", marker)
				if code != 125 {
					t.Fatalf("exit %d; want 125: %s", code, stderr)
				}
				lines := strings.Split(strings.TrimSpace(stderr), "\n")
				if len(lines) != 1 || !strings.Contains(stderr, "not a regular file") {
					t.Fatalf("stderr %q; want one line saying the file is not a regular file", stderr)
				}
				if unix.Access(marker, unix.F_OK) == nil {
					t.Fatal("the child ran")
				}
			})
		}
	}
}
