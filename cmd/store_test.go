package cmd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/redact"
	"github.com/leaderrun/leaderrun/internal/run"
	"github.com/leaderrun/leaderrun/lease"
)

// secretForms are --store values with a typo that puts a credential where
// no parser expects it, for every scheme. The secret is S3cr3tPW (a
// password, key or SAS signature); no message may show it.
var secretForms = []string{
	// Redis: the forms and their relatives.
	"redis:/:S3cr3tPW@127.0.0.1:1",
	"redis:://:S3cr3tPW@127.0.0.1:1",
	"redis:S3cr3tPW@127.0.0.1",
	"redis//u:S3cr3tPW@127.0.0.1",
	"redis:/u:S3cr3tPW@127.0.0.1:1/0",
	"REDIS:/:S3cr3tPW@127.0.0.1:1",
	"redis:///:S3cr3tPW@127.0.0.1:1/x",
	"redis://u:S3cr3tPW",
	"redis://:S3cr3tPW",
	"redis://u:S3cr3tPW@",
	"redis://u:S3cr3tPW@127.0.0.1:S3cr3tPW",
	"redis://:S3cr3tPW@127.0.0.1:1/S3cr3tPW",
	"redis://:S3cr3tPW@127.0.0.1:1/0/1",
	"redis://127.0.0.1:1?S3cr3tPW",
	"redis://127.0.0.1:1?S3cr3tPW&db=1",
	"redis://127.0.0.1:1?password=S3cr3tPW",
	"redis://127.0.0.1:1#S3cr3tPW",
	"redis://:S3cr3tPW@127.0.0.1:1,127.0.0.1:2",
	"redis://:%zzS3cr3tPW@127.0.0.1:1",
	"redis://:S3cr3t?PW@127.0.0.1:1",
	"rediss:/:S3cr3tPW@127.0.0.1:1",
	"rediss://u:S3cr3tPW",
	"unix:/:S3cr3tPW@/tmp/redis.sock",
	"unix://:S3cr3tPW@127.0.0.1/sock",
	"unix://:S3cr3tPW@",
	"unix//:S3cr3tPW@/tmp/redis.sock",
	"redis+sentinel:/:S3cr3tPW@127.0.0.1:1/m",
	"redis+sentinel://:S3cr3tPW@127.0.0.1:1",
	"redis+sentinel://:S3cr3tPW@127.0.0.1:1/m/x",
	"redis+sentinel://u:S3cr3tPW",
	"redis+sentinal://:S3cr3tPW@127.0.0.1:1/m",
	"redis+cluster:/:S3cr3tPW@127.0.0.1:1",
	"redis+cluster://:S3cr3tPW@127.0.0.1:1/1",
	"redis+cluster://:S3cr3tPW@127.0.0.1:1?db=1",
	"redis+cluster//:S3cr3tPW@127.0.0.1:1",
	"rediss+cluster://u:S3cr3tPW",
	"redis+clustr://:S3cr3tPW@127.0.0.1:1",
	// Azure: keys and SAS signatures in the wrong place.
	"azblob:/acct/c?sv=2024&sig=S3cr3tPW",
	"azblob+https//acct.blob.core.windows.net/c?sig=S3cr3tPW",
	"azblob://acct/c?sv=2024&sg=S3cr3tPW",
	"azblob://acct/c?S3cr3tPW",
	"azblob://u:S3cr3tPW@acct/c",
	"azblob://acct:S3cr3tPW/c",
	"azblob://acct/c?sig=%zzS3cr3tPW",
	"azblob://acct/c?poll=S3cr3tPW",
	"azblob://acct/S3cr3tPW+key/=",
	"azblob+https://acct.blob.core.windows.net/S3cr3tPW+/=?sig=x",
	"azblob+http://127.0.0.1:1/S3cr3tPW+key=/c",
	"azblob+htps://acct/c?sig=S3cr3tPW",
	"azblob://acct/c#sig=S3cr3tPW",
	"azblob:///c?sig=S3cr3tPW&sv=2024&x",
	// Other schemes and no scheme at all.
	"file:/:S3cr3tPW@/tmp/x",
	"file:///tmp/x?sig=S3cr3tPW",
	"bogus://u:S3cr3tPW@127.0.0.1",
	"S3cr3tPW",
	":S3cr3tPW@127.0.0.1:1",
	"//u:S3cr3tPW@127.0.0.1:1",
	"https://acct.blob.core.windows.net/c?sig=S3cr3tPW",
}

// TestStoreURLTyposHideSecrets: every malformed --store value is refused
// with a configuration error whose message (and leaderrun's whole stderr)
// never shows the secret.
func TestStoreURLTyposHideSecrets(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, raw := range secretForms {
		t.Run(raw, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := openStore(ctx, raw, lease.DashFlag, lease.OpenOptions{CallTimeout: time.Second, Getenv: getenv})
			if err == nil {
				_ = s.Close()
				t.Fatalf("openStore accepted %s", redact.URL(raw))
			}
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("openStore: %v; want ErrConfig", err)
			}
			for _, frag := range []string{"S3cr3t", "PW@"} {
				if strings.Contains(err.Error(), frag) {
					t.Fatalf("message shows the secret: %s", err)
				}
			}
			if got := redact.URL(raw); strings.Contains(got, "S3cr3t") {
				t.Fatalf("redactURL = %q shows the secret", got)
			}
			code, _, errOut := runCapture(t, "--store", raw, "--wait", "0", "--", "true")
			chain := strings.Contains(errOut, "lease: ") && !strings.HasPrefix(raw, "file:") // file:// errors are the file store's
			if code != run.ExitFailure || strings.Contains(errOut, "S3cr3t") || chain {
				t.Fatalf("leaderrun: exit %d, stderr %q; want 125, one line without the secret or package chains", code, errOut)
			}
			t.Logf("%s", strings.TrimSpace(errOut))
		})
	}
}

// A --store value that is not a URL of a known scheme gets the URL it was
// likely meant to be, and every suggestion is accepted when followed: the
// store's own parser takes it (the store itself may be unreachable).
func TestStoreURLSuggestions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		raw, says, follow string
	}{
		{"127.0.0.1:1", `--store "127.0.0.1:1" is not a URL; did you mean redis://127.0.0.1:1?`, "redis://127.0.0.1:1"},
		{"127.0.0.1:1/2", "did you mean redis://127.0.0.1:1/2?", "redis://127.0.0.1:1/2"},
		{"[::1]:1", "did you mean redis://[::1]:1?", "redis://[::1]:1"},
		{"127.0.0.1:2379", "did you mean etcd://127.0.0.1:2379?", "etcd://127.0.0.1:2379"},
		{"127.0.0.1:5432/leases", "did you mean postgres://127.0.0.1:5432/leases?", "postgres://127.0.0.1:5432/leases"},
		{"reddis://127.0.0.1:1", `unknown scheme "reddis"; did you mean redis://127.0.0.1:1?`, "redis://127.0.0.1:1"},
		{"REDDIS://127.0.0.1:1", "did you mean redis://127.0.0.1:1?", "redis://127.0.0.1:1"},
		{"rediss+clustr://127.0.0.1:1", "did you mean rediss+cluster://127.0.0.1:1?", "rediss+cluster://127.0.0.1:1"},
		{"ectd://127.0.0.1:1", "did you mean etcd://127.0.0.1:1?", "etcd://127.0.0.1:1"},
		{"postgress://app@127.0.0.1:1/db", "did you mean postgres://…?", "postgres://app@127.0.0.1:1/db"},
		{"redis+sentinal://:pw@127.0.0.1:1/m", "did you mean redis+sentinel://…?", "redis+sentinel://:pw@127.0.0.1:1/m"},
		{"azbob://acct/jobs", "did you mean azblob://acct/jobs?", "azblob://acct/jobs"},
		{"fil://" + dir, "did you mean file://" + dir + "?", "file://" + dir},
		{"file:" + dir, "did you mean file://" + dir + "?", "file://" + dir},
		{dir, "did you mean file://" + dir + "?", "file://" + dir},
		{"redis:127.0.0.1:1", "did you mean redis://127.0.0.1:1?", "redis://127.0.0.1:1"},
		{"redis//127.0.0.1:1", "did you mean redis://127.0.0.1:1?", "redis://127.0.0.1:1"},
		{"redis:/:pw@127.0.0.1:1", "did you mean redis://…?", "redis://:pw@127.0.0.1:1"},
		{"unix:/run/redis.sock", "did you mean unix:///run/redis.sock?", "unix:///run/redis.sock"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			o := lease.OpenOptions{CallTimeout: 100 * time.Millisecond, Getenv: func(string) string { return "" }}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := openStore(ctx, tc.raw, lease.DashFlag, o)
			if err == nil || !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("openStore: %v; want ErrConfig saying %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Fatalf("message shows the password: %v", err)
			}
			s, err := openStore(ctx, tc.follow, lease.DashFlag, o)
			if err == nil {
				s.Close()
			} else if errors.Is(err, lease.ErrConfig) {
				t.Fatalf("the suggestion followed, %s, is refused: %v", tc.follow, err)
			}
		})
	}
	for _, raw := range []string{"redis.internal", "ftp://example", "http://x", "//u:pw@127.0.0.1:1", "h:pw@127.0.0.1:1"} {
		if sug := suggestStore(raw); sug != "" {
			t.Errorf("suggestStore(%q) = %q; want nothing (no store is near)", raw, sug)
		}
	}
}
