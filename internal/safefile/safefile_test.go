package safefile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ok, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte{'a'}, MaxSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	exact := filepath.Join(dir, "exact")
	if err := os.WriteFile(exact, bytes.Repeat([]byte{'a'}, MaxSize), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error // nil: read
	}{
		{ok, nil},
		{exact, nil},
		{fifo, ErrNotRegular}, // a blocking open would never return
		{"/dev/zero", ErrNotRegular},
		{dir, ErrNotRegular},
		{big, ErrTooBig},
		{filepath.Join(dir, "missing"), os.ErrNotExist},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			b, err := Read(tc.path)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if fi, _ := os.Stat(tc.path); int64(len(b)) != fi.Size() {
					t.Fatalf("read %d bytes of %d", len(b), fi.Size())
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read = %v; want %v", err, tc.want)
			}
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != tc.path {
				t.Fatalf("error %v does not name the path", err)
			}
			if Check(tc.path) == nil {
				t.Fatal("Check accepted what Read refused")
			}
		})
	}
}
