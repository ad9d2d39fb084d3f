package bloblease

import (
	"bufio"
	"context"
	"testing"
	"time"

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
			lines++
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
