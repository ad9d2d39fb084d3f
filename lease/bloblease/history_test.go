package bloblease

import (
	"bufio"
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"

	"github.com/leaderrun/leaderrun/lease"
)

// TestRunHistoryCompacted: many runs with a small keep: readers see the
// newest runs, each with its end, and the blob is compacted so it never
// holds more than keep runs and slack runs' lines.
func TestRunHistoryCompacted(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{CallTimeout: 5 * time.Second})
	defer s.Close()
	ctx := context.Background()
	const keep, runs = 5, 40
	start := time.Now().UTC()
	maxLines := 0
	for i := 1; i <= runs; i++ {
		r := lease.Run{Name: "compact", Label: "h", Token: uint64(i), Start: start.Add(time.Duration(i) * time.Second)}
		if err := s.RecordRun(ctx, r, keep); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		r.End, r.Outcome = r.Start.Add(time.Second), lease.OutcomeOK
		if err := s.RecordRun(ctx, r, keep); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
		dl, err := s.cc.NewBlobClient(runsBlobName("compact")).DownloadStream(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		lines := 0
		for sc := bufio.NewScanner(dl.Body); sc.Scan(); {
			if len(sc.Bytes()) > 0 {
				lines++
			}
		}
		dl.Body.Close()
		maxLines = max(maxLines, lines)
	}
	if bound := keep + 2*(slack(keep)+1); maxLines > bound {
		t.Fatalf("the blob grew to %d lines; compaction should keep it at most %d", maxLines, bound)
	}
	// Readers see every valid run the blob still holds (a writer's keep
	// trims only at compaction): at least the newest keep, newest first.
	got, err := s.Runs(ctx, "compact", 0)
	if err != nil || len(got) < keep || len(got) > keep+slack(keep)+1 {
		t.Fatalf("Runs = %d runs, %v; want %d to %d", len(got), err, keep, keep+slack(keep)+1)
	}
	for i, r := range got {
		if want := uint64(runs - i); r.Token != want || !r.Ended() {
			t.Fatalf("run %d = %+v; want token %d with its end", i, r, want)
		}
	}
}

// TestRunHistoryJunkAppends: six 4 MiB appends of junk (no newline: one
// 24 MiB line) between runs: readers still see the runs after the junk and
// the ones before it, a read of the newest run reads only the blob's end
// (it allocates a small fraction of the blob), a read of all holds about one
// chunk at a time (it allocates less than half the blob), and the next start compacts
// the blob by its size, junk gone, runs kept.
func TestRunHistoryJunkAppends(t *testing.T) {
	// Not parallel: runtime.MemStats counts the whole process, and a
	// parallel test's allocations made Runs(0) look 12 MiB big in a full
	// run (alone it allocates about 2 MiB).
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{CallTimeout: 30 * time.Second})
	defer s.Close()
	ctx := context.Background()
	const name = "junk"
	start := time.Now().Add(-time.Hour).UTC()
	base := uint64(start.UnixMicro())
	record := func(i int, ended bool) {
		t.Helper()
		r := lease.Run{Name: name, Label: "h", Token: base + uint64(i), Start: start.Add(time.Duration(i) * time.Minute)}
		if ended {
			r.End, r.Outcome = r.Start.Add(time.Second), lease.OutcomeOK
		}
		if err := s.RecordRun(ctx, r, 0); err != nil {
			t.Fatalf("RecordRun(%d): %v", i, err)
		}
	}
	record(1, false)
	record(1, true)
	ac := s.cc.NewAppendBlobClient(runsBlobName(name))
	junk := bytes.Repeat([]byte("x"), 4<<20)
	for range 6 {
		if _, err := ac.AppendBlock(ctx, streaming.NopCloser(bytes.NewReader(junk)), nil); err != nil {
			t.Fatalf("AppendBlock: %v", err)
		}
	}
	record(2, true) // an end record alone: no compaction
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := s.Runs(ctx, name, 1)
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != 1 || got[0].Token != base+2 {
		t.Fatalf("Runs(1) after the junk = %+v, %v; want the run after it", got, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 4<<20 {
		t.Errorf("Runs(1) allocated %d bytes of a %d-byte blob: it should read the end only", alloc, 6*len(junk))
	}
	t.Logf("Runs(1) allocated %d KiB reading a %d MiB blob", alloc>>10, 6*len(junk)>>20)
	runtime.ReadMemStats(&before)
	got, err = s.Runs(ctx, name, 0)
	runtime.ReadMemStats(&after)
	if err != nil || len(got) != 2 || got[1].Token != base+1 {
		t.Fatalf("Runs(0) = %+v, %v; want both runs, the one before the junk too", got, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12<<20 {
		t.Errorf("Runs(0) allocated %d MiB going through a 24 MiB blob: it should hold about one chunk at a time", alloc>>20)
	}
	t.Logf("Runs(0) allocated %d KiB in all, going through the whole blob", (after.TotalAlloc-before.TotalAlloc)>>10)
	record(3, false) // a start: the blob is far beyond its size bound
	props, err := s.cc.NewBlobClient(runsBlobName(name)).GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if size := *props.ContentLength; size > 64<<10 {
		t.Fatalf("the blob holds %d bytes after a start; compaction should have dropped the junk", size)
	}
	if got, err := s.Runs(ctx, name, 0); err != nil || len(got) != 3 || got[0].Token != base+3 || got[2].Token != base+1 {
		t.Fatalf("Runs after compaction = %+v, %v; want the three runs", got, err)
	}
}
