package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leaderrun/leaderrun/internal/pingwire"
)

// withStreams makes streamFile return files (the pairs pingwire.Tail
// describes) for the test.
func withStreams(t *testing.T, files ...*os.File) {
	t.Helper()
	saved := streamFile
	streamFile = func(i int) *os.File { return files[i] }
	t.Cleanup(func() { streamFile = saved })
}

// message is what a request carries as the ping's body, by format.
func message(f pingwire.Format, s sent) string {
	switch f {
	case pingwire.Kuma:
		return s.query.Get("msg")
	case pingwire.Cronitor:
		return s.query.Get("message")
	}
	return s.body
}

// TestTail: with a tail, every byte the child wrote reaches the stream's
// own place, unchanged, and a failure's ping carries the last bytes after
// leaderrun's line, cut to the format's limit at a character's boundary,
// under a line saying what it is; a success's ping carries none.
func TestTail(t *testing.T) {
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "line %03d: naïve café\n", i) // two-byte characters: the cut must not split one
	}
	output := b.String()
	for _, f := range pingwire.Formats {
		t.Run(string(f), func(t *testing.T) {
			srv, got := service(t)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			dst, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			withStreams(t, r, dst)
			if _, err := w.WriteString(output); err != nil {
				t.Fatal(err)
			}
			w.Close()
			in := srv.URL + "/KEY\n2000\n" + string(f) + "\n" + pingwire.Tail{Bytes: 5001, Streams: []string{"out+err"}}.Line() + failed.Line() + ok.Line()
			var report strings.Builder
			if code := run(strings.NewReader(in), &report); code != 0 {
				t.Fatalf("exit %d: %s", code, report.String())
			}
			if copied, _ := os.ReadFile(dst.Name()); string(copied) != output {
				t.Errorf("the stream's place got %d bytes; want the %d the child wrote, unchanged", len(copied), len(output))
			}
			reqs := got()
			if len(reqs) < 2 {
				t.Fatalf("%d requests: %+v", len(reqs), reqs)
			}
			fail, success := message(f, reqs[len(reqs)-2]), message(f, reqs[len(reqs)-1])
			if success != ok.Body {
				t.Errorf("the success's ping carries %q; want only leaderrun's line", success)
			}
			line, rest, _ := strings.Cut(fail, "\n")
			head, tail, _ := strings.Cut(rest, "\n")
			want := min(5001, f.BodyLimit()-len(failed.Body)-2-len(head))
			if line != failed.Body || !strings.HasPrefix(head, "--- the last ") || !strings.HasSuffix(head, fmt.Sprintf(" bytes of the command's output (stdout and stderr) (%d in all) ---", len(output))) ||
				len(fail) > f.BodyLimit() || !utf8.ValidString(fail) || !strings.HasSuffix(output, tail) || len(tail) < want-1 {
				t.Errorf("the failure's ping carries (%d bytes, limit %d):\n%.300s\n…\nwant leaderrun's line, a line saying what follows, and the last %d bytes of the output (less a split character)", len(fail), f.BodyLimit(), fail, want)
			}
		})
	}
}

// TestTailRing: the ring keeps the last bytes whatever the chunks' sizes.
func TestTailRing(t *testing.T) {
	tl := &tailer{size: 10, ring: make([]byte, 10), done: make(chan struct{})}
	close(tl.done)
	var all string
	for _, chunk := range []string{"abc", "defghij", "k", "lmnopqrstuvwxyz0123", "45"} {
		tl.keep([]byte(chunk))
		all += chunk
		got, total := tl.snapshot(0)
		want := all[max(len(all)-10, 0):]
		if string(got) != want || total != int64(len(all)) {
			t.Errorf("after %q: %q, %d in all; want %q, %d", chunk, got, total, want, len(all))
		}
	}
}

// TestTailOfTerminals: with no stream to read (both were terminals), a
// failure's ping says so rather than carrying nothing silently.
func TestTailOfTerminals(t *testing.T) {
	srv, got := service(t)
	in := srv.URL + "/KEY\n2000\nhc\n" + pingwire.Tail{Bytes: 100}.Line() + failed.Line()
	var report strings.Builder
	if code := run(strings.NewReader(in), &report); code != 0 {
		t.Fatalf("exit %d: %s", code, report.String())
	}
	if reqs := got(); len(reqs) != 1 || reqs[0].body != failed.Body+"\n--- the command's output went to a terminal: not captured ---" {
		t.Errorf("requests %+v; want the failure's, saying the output was not captured", reqs)
	}
}
