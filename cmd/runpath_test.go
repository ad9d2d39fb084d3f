package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/runner"
)

// runCaptureOS is runCapture reading the real environment (set with
// t.Setenv), as Main does: the child's environment is built from it.
func runCaptureOS(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	out, _ := os.Create(filepath.Join(dir, "out"))
	errf, _ := os.Create(filepath.Join(dir, "err"))
	defer out.Close()
	defer errf.Close()
	t.Setenv("NO_COLOR", "1")
	code := invoke(context.Background(), append([]string{"leaderrun"}, args...), env{
		stdio: Stdio{In: os.Stdin, Out: out, Err: errf},
		vars:  os.Environ(),
	})
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	return code, string(o), string(e)
}

// hookStore is a MemStore whose Wait first calls hook with the number of
// the call; when hook returns true, Wait returns at once ("try again").
type hookStore struct {
	*leasetest.MemStore
	waits atomic.Int32
	hook  func(n int32) bool
}

func (s *hookStore) Wait(ctx context.Context, name string, held *lease.HeldError) error {
	if s.hook != nil && s.hook(s.waits.Add(1)) {
		return nil
	}
	return s.MemStore.Wait(ctx, name, held)
}

// useStore makes scheme:// open s for this test.
func useStore(t *testing.T, scheme string, s lease.Store) {
	t.Helper()
	storeOpeners[scheme] = func(context.Context, string, lease.FlagSpeller, lease.OpenOptions) (lease.Store, error) {
		return s, nil
	}
	t.Cleanup(func() { delete(storeOpeners, scheme) })
}

func take(t *testing.T, s lease.Store, name, holder string) lease.Lease {
	t.Helper()
	l, err := s.TryAcquire(context.Background(), lease.Request{Name: name, Label: holder, ID: lease.NewID(), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func oneLineSaying(t *testing.T, stderr, says string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], says) {
		t.Fatalf("stderr %q; want one line saying %q", stderr, says)
	}
}

// A shell, interpreter or wrapper is no lease name.
func TestLauncherNeedsName(t *testing.T) {
	store := "file://" + t.TempDir()
	marker := filepath.Join(t.TempDir(), "started")
	for _, command := range []string{"sh", "bash", "/bin/sh", "python3", "python3.11", "/usr/bin/python3", "node", "perl", "ruby", "java", "lua5.4", "Rscript", "pwsh", "env", "timeout", "nice", "nohup", "sudo", "xargs", "busybox"} {
		t.Run(command, func(t *testing.T) {
			code, _, errOut := runCapture(t, "--store", store, "--", command, "-c", "touch "+marker)
			if code != run.ExitFailure {
				t.Fatalf("exit %d; want %d (stderr %q)", code, run.ExitFailure, errOut)
			}
			oneLineSaying(t, errOut, "give --name")
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child was started")
			}
		})
	}
	// With --name the same command runs; ordinary programs need none.
	if code, _, errOut := runCapture(t, "--store", store, "--name", "job", "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("sh with --name: exit %d (stderr %q)", code, errOut)
	}
	for _, command := range []string{"true", "sha256sum", "shred"} {
		if !run.IsLauncher(command) {
			continue
		}
		t.Errorf("%s is taken for a launcher", command)
	}
	if code, _, errOut := runCapture(t, "--store", store, "--", "true"); code != 0 {
		t.Fatalf("true without --name: exit %d (stderr %q)", code, errOut)
	}
}

// --holder with control characters is refused, and the
// refusal does not echo them raw.
func TestHolderControlCharacters(t *testing.T) {
	store := "file://" + t.TempDir()
	marker := filepath.Join(t.TempDir(), "started")
	for name, holder := range map[string]string{
		"escape":      "web\x1b[31m-1",
		"tab":         "web\t1",
		"del":         "web\x7f1",
		"c1 control":  "web\u00851",
		"invalid utf": "web\xff1",
		"bell":        "\a",
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := runCapture(t, "--store", store, "--name", "h", "--holder", holder, "--", "touch", marker)
			if code != run.ExitFailure {
				t.Fatalf("exit %d; want %d (stderr %q)", code, run.ExitFailure, errOut)
			}
			oneLineSaying(t, errOut, "--holder")
			if strings.ContainsAny(errOut, "\x1b\t\x7f\u0085\a") || strings.Contains(errOut, "\xff") {
				t.Fatalf("the refusal echoes the control character raw: %q", errOut)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child was started")
			}
		})
	}
	if code, _, errOut := runCapture(t, "--store", store, "--name", "h", "--holder", "wéb-1 (rack 3):42", "--", "true"); code != 0 {
		t.Fatalf("a printable holder was refused: exit %d (stderr %q)", code, errOut)
	}
}

// An empty command name gets a clear line, no lease.
func TestEmptyCommandName(t *testing.T) {
	s := &leasetest.MemStore{}
	useStore(t, "emptycmd", s)
	code, _, errOut := runCapture(t, "--store", "emptycmd://", "--name", "e", "--", "")
	if code != run.ExitNotFound {
		t.Fatalf("exit %d; want %d (stderr %q)", code, run.ExitNotFound, errOut)
	}
	oneLineSaying(t, errOut, "command name after -- is empty")
	code, _, errOut = runCapture(t, "--store", "emptycmd://", "--", "")
	if code != run.ExitNotFound {
		t.Fatalf("without --name: exit %d; want %d (stderr %q)", code, run.ExitNotFound, errOut)
	}
	oneLineSaying(t, errOut, "command name after -- is empty")
	if h, _ := s.Status(context.Background(), "e"); h != nil {
		t.Fatalf("lease taken for an empty command: %+v", h)
	}
}

// SIGQUIT (Ctrl-\) while waiting ends the wait like INT:
// exit 128+3, nothing started, the holder left alone, nothing of ours in the
// store.
func TestQuitWhileWaiting(t *testing.T) {
	s := &hookStore{MemStore: &leasetest.MemStore{}}
	s.hook = func(int32) bool {
		_ = syscall.Kill(os.Getpid(), syscall.SIGQUIT) // leaderrun is waiting: Notify is active
		return false
	}
	useStore(t, "quittest", s)
	first := take(t, s, "q", "first")
	marker := filepath.Join(t.TempDir(), "started")
	code, _, errOut := runCapture(t, "--store", "quittest://", "--name", "q", "--", "touch", marker)
	if code != 128+int(syscall.SIGQUIT) || !strings.Contains(errOut, "SIGQUIT while waiting") || !strings.Contains(errOut, "not started") {
		t.Fatalf("exit %d, stderr %q; want 131 and 'SIGQUIT while waiting … not started'", code, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child was started")
	}
	if h, _ := s.Status(context.Background(), "q"); h == nil || h.Token != first.Info().Token {
		t.Fatalf("the store changed: %+v; want the first holder still", h)
	}
}

var clockRE = `\d\d:\d\d:\d\d \S+` // a time of day and its zone

// Waiting says for whom and how long, a line per new
// holder, reminders at -v, and how long it took.
func TestWaitMessages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		first string
	}{
		{"bounded", []string{"--wait", "10m"}, `waiting up to 10m for lease q \(held by first since ` + clockRE + `, token 1\)`},
		{"forever", nil, `waiting for lease q \(held by first since ` + clockRE + `, token 1\)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &hookStore{MemStore: &leasetest.MemStore{}}
			first := take(t, s, "q", "first")
			var second lease.Lease
			s.hook = func(n int32) bool {
				switch n {
				case 1: // the holder changes hands while we wait
					_ = first.Release(context.Background())
					second = take(t, s, "q", "second")
				case 2:
					_ = second.Release(context.Background())
				}
				return true
			}
			useStore(t, "waitmsg", s)
			code, _, errOut := runCapture(t, append(append([]string{"--store", "waitmsg://", "--name", "q"}, tc.flags...), "--", "true")...)
			if code != 0 {
				t.Fatalf("exit %d (stderr %q)", code, errOut)
			}
			for _, want := range []string{
				tc.first,
				`lease q is now held by second since ` + clockRE + `, token 2; still waiting`,
				`lease q acquired after \d+(\.\d+)?(ms|µs|s) token=3`,
			} {
				if !regexp.MustCompile(want).MatchString(errOut) {
					t.Errorf("stderr does not match %q:\n%s", want, errOut)
				}
			}
		})
	}
	t.Run("no wait, no 'after'", func(t *testing.T) {
		useStore(t, "waitmsg", &leasetest.MemStore{})
		code, _, errOut := runCapture(t, "--store", "waitmsg://", "--name", "q", "--", "true")
		if code != 0 || strings.Contains(errOut, "waiting") || strings.Contains(errOut, "acquired after") || !strings.Contains(errOut, "lease q acquired") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
}

// The reminder comes every remindEvery at -v, and not at the default level.
func TestWaitReminder(t *testing.T) {
	old := remindEvery
	remindEvery = 20 * time.Millisecond
	t.Cleanup(func() { remindEvery = old })
	for _, verbose := range []bool{true, false} {
		t.Run(fmt.Sprint("verbose=", verbose), func(t *testing.T) {
			s := &hookStore{MemStore: &leasetest.MemStore{}}
			first := take(t, s, "r", "first")
			// Waits 1 and 2 block until the reminder ends them; the third
			// finds the lease released.
			s.hook = func(n int32) bool {
				if n == 3 {
					_ = first.Release(context.Background())
					return true
				}
				return false
			}
			useStore(t, "remind", s)
			args := []string{"--store", "remind://", "--name", "r", "--", "true"}
			if verbose {
				args = append([]string{"-v"}, args...)
			}
			code, _, errOut := runCapture(t, args...)
			if code != 0 {
				t.Fatalf("exit %d (stderr %q)", code, errOut)
			}
			got := strings.Count(errOut, "still waiting for lease r after ")
			if want := map[bool]int{true: 2, false: 0}[verbose]; got != want {
				t.Fatalf("%d reminders; want %d:\n%s", got, want, errOut)
			}
		})
	}
}

// A grace shrunk to fit a short --ttl is said at -v only (a default adjusted
// to fit is no news on every run); a grace the user gave is not reported.
func TestShrunkGraceReported(t *testing.T) {
	useStore(t, "grace", &leasetest.MemStore{Epsilon: 5 * time.Millisecond})
	code, _, errOut := runCapture(t, "--store", "grace://", "--name", "g", "--ttl", "2s", "--", "true")
	if code != 0 || strings.Contains(errOut, "shrunk") {
		t.Fatalf("exit %d, stderr %q; want no grace line at the default level", code, errOut)
	}
	code, _, errOut = runCapture(t, "-v", "--store", "grace://", "--name", "g", "--ttl", "2s", "--", "true")
	if code != 0 || !regexp.MustCompile(`grace shrunk from 3s to \d+ms to fit --ttl 2s`).MatchString(errOut) {
		t.Fatalf("exit %d, stderr %q; want the shrunk grace reported at -v", code, errOut)
	}
	code, _, errOut = runCapture(t, "--store", "grace://", "--name", "g", "--ttl", "2s", "--grace", "100ms", "--", "true")
	if code != 0 || strings.Contains(errOut, "shrunk") {
		t.Fatalf("exit %d, stderr %q; an explicit grace is not shrunk", code, errOut)
	}
}

// No chain of package prefixes in what users read. Errors
// are written for people where they are made (sentinels' texts are words,
// stores return sentences) and printed as they are: nothing rewrites them.
func TestReadableErrors(t *testing.T) {
	prefix := regexp.MustCompile(`^[a-z]+: `)
	for _, sentinel := range []error{
		lease.ErrHeld, lease.ErrLost, lease.ErrNotHeld, lease.ErrUnavailable, lease.ErrConfig,
		lease.ErrUnsafeTiming, lease.ErrBadName, lease.ErrNoRunway,
		runner.ErrNotFound, runner.ErrNotExecutable, runner.ErrUnhealthy, runner.ErrGuardDied, runner.ErrNoCgroup,
	} {
		if prefix.MatchString(sentinel.Error()) {
			t.Errorf("sentinel %q starts with a package prefix", sentinel)
		}
	}
	for _, err := range []error{
		lease.NewError("Redis at 127.0.0.1:1 is unreachable: connection refused", lease.ErrUnavailable),
		fmt.Errorf("%w: --ttl 1s is shorter than this store accepts", lease.ErrConfig),
		fmt.Errorf("%w: nosuch", runner.ErrNotFound),
	} {
		if got := classify(err).msg; got != err.Error() {
			t.Errorf("classify(%q).msg = %q; want the error's own text", err, got)
		}
	}
	// The final line of a run against a store that is not there.
	code, _, errOut := runCapture(t, "--store", "redis://127.0.0.1:1", "--wait", "0", "--name", "x", "--", "true")
	if code != run.ExitFailure || !strings.Contains(errOut, "127.0.0.1:1") || strings.Contains(errOut, "lease: ") || strings.Contains(errOut, "redislease") {
		t.Fatalf("exit %d, stderr %q; want 125 and the address without package prefixes", code, errOut)
	}
}

// credStore opens the real store named after "credtest+" (so it reads its
// credentials from the environment exactly as in a real run; opening does
// no I/O), closes it and hands out an in-memory store instead.
func useCredStore(t *testing.T) {
	t.Helper()
	for _, real := range []string{"redis", "azblob+http", "azblob"} {
		scheme := "credtest+" + real
		storeOpeners[scheme] = func(ctx context.Context, raw string, _ lease.FlagSpeller, o lease.OpenOptions) (lease.Store, error) {
			s, err := openStore(ctx, strings.TrimPrefix(raw, "credtest+"), lease.DashFlag, o)
			if err != nil {
				return nil, err
			}
			_ = s.Close()
			return &leasetest.MemStore{}, nil
		}
		t.Cleanup(func() { delete(storeOpeners, scheme) })
	}
}

// childEnv runs `env` under leaderrun with vars set and returns what the
// child saw.
func childEnv(t *testing.T, vars map[string]string, args ...string) map[string]string {
	t.Helper()
	for _, k := range append(run.RemovableVars(), envLease, envLeaseHolder, envLeaseToken, envTokenDeprecated, "LEADERRUN_PASS_ENV", "AZURE_STORAGE_ACCOUNT") {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	code, out, errOut := runCaptureOS(t, append(args, "--", "env")...)
	if code != 0 {
		t.Fatalf("exit %d (stderr %q)", code, errOut)
	}
	for _, k := range run.SecretVars {
		if v := vars[k]; v != "" && strings.Contains(errOut, v) {
			t.Fatalf("stderr shows %s: %s", k, errOut)
		}
	}
	if strings.Contains(errOut, "url-pw") {
		t.Fatalf("stderr shows the URL's password: %s", errOut)
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	return got
}

// The child gets the lease under names
// that are not leaderrun's configuration, without the outer lease's
// LEADERRUN_NAME/HOLDER and without the credentials the store consumed.
func TestChildEnvironmentVariables(t *testing.T) {
	useCredStore(t)
	absent := func(t *testing.T, got map[string]string, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if v, ok := got[k]; ok {
				t.Errorf("child got %s=%q", k, v)
			}
		}
	}
	has := func(t *testing.T, got map[string]string, kv map[string]string) {
		t.Helper()
		for k, v := range kv {
			if got[k] != v {
				t.Errorf("child got %s=%q; want %q", k, got[k], v)
			}
		}
	}
	t.Run("redis password from REDISCLI_AUTH", func(t *testing.T) {
		got := childEnv(t, map[string]string{
			"LEADERRUN_STORE":   "credtest+redis://app@127.0.0.1:1",
			"REDISCLI_AUTH":     "r3dis-pw",
			"AZURE_STORAGE_KEY": "not-read-by-redis",
			"LEADERRUN_NAME":    "outer",
			"LEADERRUN_HOLDER":  "outer-holder",
			"LEADERRUN_TOKEN":   "99",
		})
		absent(t, got, "REDISCLI_AUTH", "LEADERRUN_NAME", "LEADERRUN_HOLDER")
		has(t, got, map[string]string{
			"LEADERRUN_LEASE": "outer", "LEADERRUN_LEASE_HOLDER": "outer-holder",
			"LEADERRUN_LEASE_TOKEN": "1", "LEADERRUN_TOKEN": "1",
			"LEADERRUN_STORE": "credtest+redis://app@127.0.0.1:1", "AZURE_STORAGE_KEY": "not-read-by-redis",
		})
	})
	t.Run("password in LEADERRUN_STORE", func(t *testing.T) {
		got := childEnv(t, map[string]string{
			"LEADERRUN_STORE": "credtest+redis://app:url-pw@127.0.0.1:1",
			"REDISCLI_AUTH":   "unused-pw", // the URL's password wins: not consumed
		}, "--name", "j")
		absent(t, got, "LEADERRUN_STORE")
		has(t, got, map[string]string{"REDISCLI_AUTH": "unused-pw", "LEADERRUN_LEASE": "j"})
	})
	t.Run("azure key", func(t *testing.T) {
		got := childEnv(t, map[string]string{
			"LEADERRUN_STORE":   "credtest+azblob+http://127.0.0.1:1/devstoreaccount1/jobs",
			"AZURE_STORAGE_KEY": "YXp1cmUta2V5",
			"REDISCLI_AUTH":     "not-read-by-azure",
		}, "--name", "j")
		absent(t, got, "AZURE_STORAGE_KEY")
		has(t, got, map[string]string{"REDISCLI_AUTH": "not-read-by-azure"})
	})
	t.Run("azure connection string and SAS token", func(t *testing.T) {
		got := childEnv(t, map[string]string{
			"LEADERRUN_STORE":                 "credtest+azblob:///jobs",
			"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=YXp1cmUta2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;",
		}, "--name", "j")
		absent(t, got, "AZURE_STORAGE_CONNECTION_STRING")
		got = childEnv(t, map[string]string{
			"LEADERRUN_STORE":         "credtest+azblob+http://127.0.0.1:1/devstoreaccount1/jobs",
			"AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=c2FzLXNpZw",
		}, "--name", "j")
		absent(t, got, "AZURE_STORAGE_SAS_TOKEN")
		got = childEnv(t, map[string]string{
			"LEADERRUN_STORE": "credtest+azblob+http://127.0.0.1:1/devstoreaccount1/jobs?sv=2024&sig=c2FzLXNpZw",
		}, "--name", "j")
		absent(t, got, "LEADERRUN_STORE")
	})
	t.Run("--pass-env keeps them", func(t *testing.T) {
		vars := map[string]string{
			"LEADERRUN_STORE": "credtest+redis://:url-pw@127.0.0.1:1",
			"REDISCLI_AUTH":   "r3dis-pw",
		}
		got := childEnv(t, vars, "--name", "j", "--pass-env", "LEADERRUN_STORE")
		has(t, got, map[string]string{"LEADERRUN_STORE": vars["LEADERRUN_STORE"]})
		vars["LEADERRUN_STORE"] = "credtest+redis://app@127.0.0.1:1"
		got = childEnv(t, vars, "--name", "j", "--pass-env", "REDISCLI_AUTH")
		has(t, got, map[string]string{"REDISCLI_AUTH": "r3dis-pw"})
		vars["LEADERRUN_PASS_ENV"] = "REDISCLI_AUTH,LEADERRUN_HOLDER"
		vars["LEADERRUN_HOLDER"] = "h1"
		got = childEnv(t, vars, "--name", "j")
		has(t, got, map[string]string{"REDISCLI_AUTH": "r3dis-pw", "LEADERRUN_HOLDER": "h1", "LEADERRUN_LEASE_HOLDER": "h1"})
	})
	t.Run("--pass-env of a name leaderrun never removes", func(t *testing.T) {
		code, _, errOut := runCapture(t, "--store", "file://"+t.TempDir(), "--pass-env", "HOME", "--", "true")
		if code != run.ExitFailure {
			t.Fatalf("exit %d; want 125 (stderr %q)", code, errOut)
		}
		oneLineSaying(t, errOut, "--pass-env HOME")
	})
}

// flakyStore fails its first attempts as an unreachable Redis would.
type flakyStore struct {
	*leasetest.MemStore
	fails atomic.Int32
}

func (s *flakyStore) TryAcquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, lease.NewError("Redis at 127.0.0.1:1 is unreachable: connection refused", lease.ErrUnavailable)
	}
	return s.MemStore.TryAcquire(ctx, req)
}

// Retries of an unreachable store read without package chains: one warning
// for the run of failures (the rest at -v), then "acquired after".
func TestStoreUnavailableRetryLines(t *testing.T) {
	s := &flakyStore{MemStore: &leasetest.MemStore{}}
	s.fails.Store(2)
	useStore(t, "flaky", s)
	code, _, errOut := runCapture(t, "--store", "flaky://", "--name", "f", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d (stderr %q)", code, errOut)
	}
	if n := strings.Count(errOut, "Redis at 127.0.0.1:1 is unreachable: connection refused; retrying in "); n != 1 {
		t.Errorf("%d retry warnings; want 1 at the default level:\n%s", n, errOut)
	}
	if strings.Contains(errOut, "lease: ") || strings.Contains(errOut, "redislease") || !strings.Contains(errOut, "lease f acquired after ") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// The conflict line says who holds the lease and whether leaderrun waited.
func TestConflictLine(t *testing.T) {
	s := &leasetest.MemStore{}
	useStore(t, "conflict", s)
	take(t, s, "c", "first")
	code, _, errOut := runCapture(t, "--store", "conflict://", "--name", "c", "--wait", "0", "--", "true")
	if code != run.ExitConflict || !regexp.MustCompile(`^leaderrun: lease c is held by first since `+clockRE+`, token 1; true not started; exit 75\n$`).MatchString(errOut) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCapture(t, "--store", "conflict://", "--name", "c", "--wait", "20ms", "--conflict-exit-code", "0", "--", "true")
	if code != 0 || !regexp.MustCompile(`lease c is held by first since `+clockRE+`, token 1; gave up after --wait 20ms; true not started; exit 0\n$`).MatchString(errOut) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
