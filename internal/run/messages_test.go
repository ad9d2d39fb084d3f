package run

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// The final line says how SIGKILL actually came.
func TestStopText(t *testing.T) {
	for _, tc := range []struct {
		res  runner.Result
		want string
	}{
		{runner.Result{Stopped: true}, "stopped job with SIGTERM"},
		{runner.Result{Stopped: true, Signal: syscall.SIGKILL}, "stopped job with SIGTERM, then SIGKILL at the lease's kill point (from the guard)"},
		{runner.Result{Stopped: true, Killed: true, KillAfter: 3 * time.Second}, "stopped job with SIGTERM, then SIGKILL after the 3s grace"},
		{runner.Result{Stopped: true, Killed: true, KillPoint: true}, "killed job with SIGTERM and SIGKILL at once: the lease's kill point had come"},
		{runner.Result{Stopped: true, Killed: true, KillPoint: true, KillAfter: 665 * time.Millisecond}, "stopped job with SIGTERM, then SIGKILL 665ms later at the lease's kill point"},
	} {
		if got := stopText("job", syscall.SIGTERM, tc.res); got != tc.want {
			t.Errorf("stopText(%+v) = %q; want %q", tc.res, got, tc.want)
		}
	}
}

func TestURLCarriesCredential(t *testing.T) {
	for raw, want := range map[string]bool{
		"redis://127.0.0.1:6379":                                   false,
		"redis://user@127.0.0.1:6379":                              false,
		"redis://:pw@127.0.0.1:6379":                               true,
		"rediss://user:pw@h:6380/0":                                true,
		"azblob://acct/c":                                          false,
		"azblob+https://acct.blob.core.windows.net/c?sv=1&sig=abc": true,
		"file:///var/lock/leaderrun":                               false,
		"redis:/:S3cr3t@127.0.0.1:6379":                            true,
		"redis://h:6379/%zz":                                       false,
		// every credential form of every store
		"etcd://user:pw@127.0.0.1:2379":                                   true,
		"etcds://127.0.0.1:2379?ca=/etc/ca.pem":                           false,
		"postgres://app@db/prod?password=S3cr3t":                          true,
		"postgres://app@db/prod?PassWord=S3cr3t":                          true,
		"postgresql://app@db/prod?sslmode=verify-full&sslpassword=S3cr3t": true,
		"postgres://app:pa@ssW0rd@db/prod":                                true,
		"postgres://app@db/prod?sslmode=require":                          false,
		"postgres://app@db/prod?password=":                                false,
		"azblob+http://127.0.0.1:10000/devstoreaccount1/c?SIG=abc":        true,
		"postgres://app@db/prod?password=S3cr3t&x=%zz":                    true,
	} {
		if got := urlCarriesCredential(raw); got != want {
			t.Errorf("urlCarriesCredential(%q) = %v; want %v", raw, got, want)
		}
	}
}

// Holder labels read back from a store reach the terminal escaped, in every
// text form: waiting and conflict lines, status, watch, systemd's STATUS=.
func TestStoreTextEscaped(t *testing.T) {
	h := lease.Holder{Label: "x\x1b]0;pwned\a", Token: 7, Since: time.Now()}
	now := time.Now()
	for what, s := range map[string]string{
		"heldBy":        say.HeldBy(h, now),
		"waitingStatus": waitingStatus("n", h, now),
		"conflictText":  conflictText(Config{Name: "n", Args: []string{"job"}, ConflictCode: 75}, h),
	} {
		if strings.ContainsAny(s, "\x1b\a") {
			t.Errorf("%s printed a control character: %q", what, s)
		}
		if !strings.Contains(s, `x\x1b]0;pwned\x07`) {
			t.Errorf("%s = %q; want the label escaped", what, s)
		}
	}
}

// A store that keeps failing while leaderrun waits is said again at the
// default level (after outageFirstNote, then every outageNoteEvery, with how
// long it has been), not once and then never: a mistyped host name looked
// like a silent hang under the default --wait.
func TestOutageReminders(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
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

// A lost lease's cause is said in the final line without "lost" twice.
func TestLostWhy(t *testing.T) {
	if got := lostWhy(lease.NewError("lock file x was replaced", lease.ErrLost)); got != " (lock file x was replaced)" {
		t.Errorf("lostWhy = %q", got)
	}
	if got := lostWhy(lease.ErrLost); got != "" {
		t.Errorf("lostWhy(ErrLost) = %q; want nothing", got)
	}
}
