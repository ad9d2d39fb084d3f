package cmd

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"host-a:123":          "host-a:123",
		"é ü 漢":               "é ü 漢",
		"evil\x1b[2Jhost":     `evil\x1b[2Jhost`,
		"bell\a":              `bell\x07`,
		"del\x7f":             `del\x7f`,
		"c1\u009bcsi":         `c1\x9bcsi`,
		"bad\xffutf8":         `bad\xffutf8`,
		`back\slash`:          `back\\slash`,
		"nl\nand\rcr":         `nl\x0aand\x0dcr`,
		"line\u2028separator": `line\u2028separator`,
		"para\u2029graph":     `para\u2029graph`,
		"bidi\u202eevil":      `bidi\u202eevil`,
		"isolate\u2066x":      `isolate\u2066x`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q; want %q", in, got, want)
		}
	}
}

// Holder labels read back from a store reach the terminal escaped, in every
// text form: waiting and conflict lines, status, watch, systemd's STATUS=.
func TestStoreTextEscaped(t *testing.T) {
	h := lease.Holder{Label: "x\x1b]0;pwned\a", Token: 7, Since: time.Now()}
	now := time.Now()
	for what, s := range map[string]string{
		"heldBy":        heldBy(h, now),
		"waitingStatus": waitingStatus("n", h, now),
		"conflictText":  conflictText(runConfig{name: "n", args: []string{"job"}, conflictCode: 75}, h),
	} {
		if strings.ContainsAny(s, "\x1b\a") {
			t.Errorf("%s printed a control character: %q", what, s)
		}
		if !strings.Contains(s, `x\x1b]0;pwned\x07`) {
			t.Errorf("%s = %q; want the label escaped", what, s)
		}
	}
}

func TestMisspeltVars(t *testing.T) {
	got := misspeltVars([]string{
		"LEADERRUN_TLL=5s",           // typo of LEADERRUN_TTL
		"LEADERRUN_STROE=redis://x",  // transposition
		"LEADERRUN_TTL=5s",           // known
		"LEADERRUN_LEASE_TOKEN=3",    // given to children
		"LEADERRUN_TOKEN=3",          // given to children (old name)
		"LEADERRUN_JOB_DIRECTORY=/x", // a script's own: far from every name
		"LEADERRUN_TEST_REDIS_URL=x", // the test harness's own
		"PATH=/bin",
	})
	want := []string{
		"LEADERRUN_TLL is not a leaderrun variable and is ignored; did you mean LEADERRUN_TTL?",
		"LEADERRUN_STROE is not a leaderrun variable and is ignored; did you mean LEADERRUN_STORE?",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("misspeltVars = %q; want %q", got, want)
	}
}

// A store that keeps failing while leaderrun waits is said again at the
// default level (after outageFirstNote, then every outageNoteEvery, with how
// long it has been), not once and then never: a mistyped host name looked
// like a silent hang under the default --wait.
func TestOutageReminders(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(&textHandler{w: &buf, level: slog.LevelInfo, tty: -1, mu: &sync.Mutex{}})
	oldFirst, oldEvery := outageFirstNote, outageNoteEvery
	t.Cleanup(func() { outageFirstNote, outageNoteEvery = oldFirst, oldEvery })
	report := waitReporter(log, "n", lease.WaitForever)
	fail := func(first bool) {
		report(lease.WaitEvent{Kind: lease.WaitStoreUnavailable, First: first, Err: fmt.Errorf("x: %w: the host name redis.internl does not resolve", lease.ErrUnavailable), RetryIn: time.Second})
	}
	outageFirstNote, outageNoteEvery = time.Hour, time.Hour
	fail(true)
	fail(false) // within the first note's delay: -v only
	if n := strings.Count(buf.String(), "does not resolve"); n != 1 {
		t.Fatalf("%d lines; want the first failure only:\n%s", n, buf.String())
	}
	outageFirstNote, outageNoteEvery = 0, 0
	fail(true)
	fail(false)
	fail(false)
	if n := strings.Count(buf.String(), "(failing for "); n != 2 {
		t.Fatalf("%d reminders; want 2, each saying how long:\n%s", n, buf.String())
	}
}

// POSIX TZ values without daylight saving time, which Go does not read, are
// followed as date(1) follows them; anything else is left to Go.
func TestPosixZone(t *testing.T) {
	for tz, want := range map[string]int{"UTC+3": -3 * 3600, "EST5": -5 * 3600, "<+0530>-5:30": 5*3600 + 30*60, "JST-9": 9 * 3600, "ABC+1:02:03": -(3600 + 2*60 + 3)} {
		loc := posixZone(tz)
		if loc == nil {
			t.Errorf("posixZone(%q) = nil", tz)
			continue
		}
		if _, off := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Zone(); off != want {
			t.Errorf("posixZone(%q): offset %d; want %d", tz, off, want)
		}
	}
	for _, tz := range []string{"", "UTC", "Europe/Berlin", "EST5EDT", "EST5EDT,M3.2.0,M11.1.0", "CET-1CEST", "X+1", "UTC+99", "<+03", ":UTC"} {
		if loc := posixZone(tz); loc != nil {
			t.Errorf("posixZone(%q) = %v; want nil (Go's own)", tz, loc)
		}
	}
}

// --pass-env NOTIFY_SOCKET is accepted (leaderrun removes it from the child
// under systemd) and keeps it for the child.
func TestPassEnvNotifySocket(t *testing.T) {
	if _, err := parsePassEnv([]string{"NOTIFY_SOCKET"}); err != nil {
		t.Fatalf("--pass-env NOTIFY_SOCKET: %v", err)
	}
}
