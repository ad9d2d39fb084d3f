package redact

import (
	"strings"
	"testing"
)

// TestURLShowsPlainParts: what cannot be a secret stays readable.
func TestURLShowsPlainParts(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379/0":                               "redis://127.0.0.1:6379/0",
		"redis://u:pw@h:6379/0":                                  "redis://…@h:6379/0",
		"redis+cluster://a:1,b:2":                                "redis+cluster://a:1,b:2",
		"rediss://[::1]:6380?ca=/x":                              "rediss://[::1]:6380?…",
		"azblob+https://acct.blob.core.windows.net/c?sv=1&sig=S": "azblob+https://acct.blob.core.windows.net/c?…",
		"file:///var/lock/leaderrun":                             "file:///var/lock/leaderrun",
		"/var/lock/leaderrun":                                    "/var/lock/leaderrun",
		"redis://h:pw/0":                                         Hidden,
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestURLHidesSecrets(t *testing.T) {
	for in, secret := range map[string]string{
		"redis://user:hunter2@host:6379/0":                               "hunter2",
		"rediss://:s3cr3t@host:6380":                                     "s3cr3t",
		"azblob+https://acct.blob.core.windows.net/c?sv=2024&sig=SIGXYZ": "SIGXYZ",
	} {
		got := URL(in)
		if strings.Contains(got, secret) {
			t.Errorf("URL(%q) = %q still shows the secret", in, got)
		}
	}
}
