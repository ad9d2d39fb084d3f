package filelease

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// FuzzLockFile puts arbitrary bytes in a lock file and checks the holder
// record decoder and the acquire path on it: readRecord never panics;
// a record it accepts survives writeRecord/readRecord unchanged; and an
// acquire on the file either fails with a classified error or mints a
// fencing token greater than the one the file held (tokens never go back).
func FuzzLockFile(f *testing.F) {
	f.Add([]byte(`{"name":"job","holder":"h:1","id":"0123456789abcdef0123456789abcdef","token":41,"since":"2026-01-02T03:04:05.123456789Z","pid":42,"held":true,"updated":"2026-01-02T03:04:06Z"}` + "\n"))
	f.Add([]byte(`{"name":"job","token":3,"held":false}` + "\n"))
	f.Add([]byte(""))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"name":"job","token":`))
	f.Add([]byte(`{"token":1e3}`))
	f.Add([]byte(`{"token":-1}`))
	f.Add([]byte(`{"token":9007199254740993,"held":true}` + "\ntrailing garbage"))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		path := s.Path("job")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		prev, decErr := readRecord(f)
		if decErr == nil {
			// Round trip through a second file: what we write we read back.
			g, err := os.Create(filepath.Join(dir, "copy"))
			if err != nil {
				t.Fatal(err)
			}
			if err := writeRecord(g, prev); err != nil {
				t.Fatal(err)
			}
			back, err := readRecord(g)
			g.Close()
			if err != nil {
				t.Fatalf("readRecord after writeRecord(%+v): %v", prev, err)
			}
			a, _ := json.Marshal(prev)
			b, _ := json.Marshal(back)
			if string(a) != string(b) {
				t.Fatalf("record round trip: wrote %s, read %s", a, b)
			}
		}
		f.Close()

		l, err := s.TryAcquire(context.Background(), lease.Request{Name: "job", Label: "fuzz", ID: lease.NewID()})
		if err != nil {
			if !errors.Is(err, lease.ErrConfig) && !errors.Is(err, lease.ErrUnavailable) {
				t.Fatalf("TryAcquire on %q: unclassified error %v", content, err)
			}
			return
		}
		defer l.Release(context.Background())
		if decErr != nil {
			t.Fatalf("TryAcquire on a lock file readRecord rejects (%v) succeeded with token %d", decErr, l.Info().Token)
		}
		if got := l.Info().Token; got <= prev.Token {
			t.Fatalf("TryAcquire on a lock file with token %d minted token %d: the token went back", prev.Token, got)
		}
	})
}
