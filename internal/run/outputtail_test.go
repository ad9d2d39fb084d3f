package run

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSameFile: 2>&1 (one open file), one pipe, or the same terminal are
// one place, whose two streams then share one pipe; two files, or one
// file opened twice at different offsets, are not.
func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	a, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	again, err := os.OpenFile(a.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := a.WriteString("moved on"); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(a.Fd())) // 2>&1: two descriptors, one open file
	if err != nil {
		t.Fatal(err)
	}
	dup := os.NewFile(uintptr(fd), "dup")
	defer dup.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, c := range []struct {
		name string
		x, y *os.File
		want bool
	}{
		{"one open file (2>&1)", a, dup, true},
		{"one pipe", w, w, true},
		{"two files", a, b, false},
		{"one file opened twice, offsets apart", a, again, false},
		{"a file and a pipe", a, w, false},
	} {
		if got := sameFile(c.x, c.y); got != c.want {
			t.Errorf("%s: sameFile = %v; want %v", c.name, got, c.want)
		}
	}
}
