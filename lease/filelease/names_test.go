package filelease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// A lease named like one of another lease's auxiliary files keeps its
// holder: history compaction of lease x (keep 1), which removes the
// leftovers of killed compactions, does not remove the lock file of a held
// lease whose name starts like them, so a second acquirer of that lease
// is refused. (Before auxiliary names had their own namespace, compaction
// unlinked x.runs-UID.new-a.lock, and a second holder started beside the
// first.)
func TestAuxiliaryNamesNeverMeetLeaseNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := context.Background()
	uid := strconv.Itoa(os.Geteuid())
	squatters := []string{
		"x.runs-" + uid + ".new-a", "x.runs-" + uid, "x.runs-" + uid + "-lock", "x.runs", "x.runs-lock",
		"x.candidates", "x.token", "x.new-a", "x.runs-" + uid + ".new-0123456789abcdef",
	}
	held := map[string]lease.Lease{}
	for _, n := range squatters {
		held[n] = acquireT(t, s, n)
	}
	// Join a standby and take a slot too, so every kind of auxiliary file
	// of x exists.
	if _, err := s.Join(ctx, "x", lease.Candidate{ID: lease.NewID(), Label: "c"}, 0); err != nil {
		t.Fatal(err)
	}
	slot := acquireT(t, s, lease.SlotName("x", 1))
	defer slot.Release(ctx)
	for tok := uint64(1); tok <= 8; tok++ {
		start := okRun("x", tok)
		start.End, start.Outcome = time.Time{}, ""
		if err := s.RecordRun(ctx, start, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordRun(ctx, okRun("x", tok), 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range squatters {
		if _, err := os.Lstat(s.Path(n)); err != nil {
			t.Errorf("lock file of held lease %s: %v", n, err)
		}
		_, err := s.TryAcquire(ctx, lease.Request{Name: n, Label: "second", ID: lease.NewID()})
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Errorf("a second TryAcquire(%s) while it is held: %v; want held (two holders)", n, err)
		}
		if h, err := s.Status(ctx, n); err != nil || h == nil {
			t.Errorf("Status(%s) = %v, %v; want held", n, h, err)
		}
	}
	if runs, err := s.Runs(ctx, "x", 10); err != nil || len(runs) == 0 {
		t.Errorf("Runs(x) = %v, %v", runs, err)
	}
	for n, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Errorf("release %s: %v", n, err)
		}
	}
}

// Every file name the store derives from a lease name (lock files, slot
// lock files, history files and their temporary files, the token counter,
// the standbys' directory) is one that no other lease name derives: the
// lease name ends at the first byte outside the names' alphabet ('~', or
// the ".lock" of a lock file), and what follows says what the file is.
func TestDerivedNamesAreDistinct(t *testing.T) {
	s := &Store{dir: "/d"}
	names := []string{"x", "x.runs", "x.runs-0", "x.runs-0.new-a", "x.candidates", "x.lock", "x.token",
		"x-token", "x_runs", "a/b", "a%b", "a.b", "x.runs-0-lock", "x.lock.lock"}
	derived := func(n string) map[string]string {
		m := map[string]string{
			"lock":       s.Path(n),
			"slot1":      s.Path(lease.SlotName(n, 1)),
			"slot99":     s.Path(lease.SlotName(n, 99)),
			"runs":       s.runsPath(n),
			"runs-lock":  s.runsPath(n) + "-lock",
			"runs-other": s.userRunsPath(n, 12345),
			"token":      s.tokenPath(n),
			"cands":      s.candDir(n),
		}
		m["runs-tmp"] = tmpPrefix(s.runsPath(n)) + "0123456789abcdef"
		return m
	}
	seen := map[string]string{}
	for _, n := range names {
		if lease.ValidateName(n) != nil {
			continue
		}
		for kind, p := range derived(n) {
			if !strings.HasPrefix(p, "/d/") || filepath.Dir(p) != "/d" {
				t.Errorf("%s of %s is %s: not a file of the directory", kind, n, p)
			}
			if prev, ok := seen[p]; ok {
				t.Errorf("%s of %s is %s, as is %s", kind, n, p, prev)
			}
			seen[p] = kind + " of " + n
			// Compaction removes what starts with its temporary prefix:
			// no file of another lease does.
			for _, m := range names {
				if m != n && lease.ValidateName(m) == nil && strings.HasPrefix(p, tmpPrefix(s.runsPath(m))) {
					t.Errorf("%s of %s (%s) starts with the temporary prefix of %s's history", kind, n, p, m)
				}
			}
		}
	}
}

// A history written by an older version (NAME.runs-UID) is still read, and
// merged with the new file's runs; it is never written or removed.
func TestOldHistoryStillRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := context.Background()
	old := s.legacyRunsBase("job") + "-" + strconv.Itoa(os.Geteuid())
	line := `{"name":"job","holder":"old","token":5,"start":"` + time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano) + `","end":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","outcome":"ok","exit_code":0}` + "\n"
	if err := os.WriteFile(old, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRun(ctx, okRun("job", uint64(time.Now().UnixMicro())), 1); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(ctx, "job", 0)
	if err != nil || len(runs) != 2 || runs[1].Token != 5 {
		t.Fatalf("Runs = %v, %v; want the new run and the old file's", tokens(runs), err)
	}
	if b, err := os.ReadFile(old); err != nil || string(b) != line {
		t.Fatalf("old history file now %q, %v; want it untouched", b, err)
	}
}

// A fencing counter more than lease.MaxClockSkew ahead of the clock (a lock
// file written 30 days ahead, by another user of a shared directory or a
// clock that stepped back) refuses the acquisition with ErrTokenAhead (and
// ErrConfig: exit 125) and writes nothing; a counter just within the bound
// is still followed, so tokens never go back. (Such a counter was followed:
// --once-per then decided periods 30 days ahead and ran on every tick, and
// the runs were left out of the history as "from the future".)
func TestCounterAheadOfClockRefused(t *testing.T) {
	t.Parallel()
	s := openT(t, t.TempDir())
	ctx := context.Background()
	plant := func(name string, ahead time.Duration) uint64 {
		t.Helper()
		tok := uint64(time.Now().Add(ahead).UnixMicro())
		rec := fmt.Sprintf(`{"name":%q,"token":%d,"held":false}`+"\n", name, tok)
		if err := os.WriteFile(s.Path(name), []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tok := plant("ahead", 30*24*time.Hour)
	_, err := s.TryAcquire(ctx, lease.Request{Name: "ahead", Label: "h", ID: lease.NewID()})
	if !errors.Is(err, lease.ErrTokenAhead) || !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), s.Path("ahead")) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("TryAcquire with the counter 30 days ahead: %v; want one line, ErrTokenAhead, naming the lock file", err)
	}
	if b, _ := os.ReadFile(s.Path("ahead")); !strings.Contains(string(b), fmt.Sprint(tok)) || strings.Contains(string(b), `"held":true`) {
		t.Fatalf("lock file after the refusal: %s; want it untouched", b)
	}
	// Slots: the same, whichever counter is ahead.
	_, err = lease.Acquire(ctx, s, lease.Request{Name: "ahead", Label: "h", ID: lease.NewID(), Slots: 2}, lease.AcquireOptions{CallTimeout: 5 * time.Second})
	if !errors.Is(err, lease.ErrTokenAhead) {
		t.Fatalf("a slot with slot 0's counter ahead: %v; want ErrTokenAhead", err)
	}
	within := plant("near", lease.MaxClockSkew-time.Minute)
	l, err := s.TryAcquire(ctx, lease.Request{Name: "near", Label: "h", ID: lease.NewID()})
	if err != nil {
		t.Fatalf("TryAcquire with the counter a minute within the bound: %v", err)
	}
	if got := l.Info().Token; got != within+1 {
		t.Fatalf("token %d; want the counter's next, %d", got, within+1)
	}
	leasetest.CheckGranted(t, l.Info(), 30*time.Second)
	_ = l.Release(ctx)
}
