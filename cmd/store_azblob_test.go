package cmd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/internal/redact"
	"github.com/leaderrun/leaderrun/lease"
)

func TestOpenStoreAzblob(t *testing.T) {
	getenv := func(k string) string {
		if k == "AZURE_STORAGE_KEY" {
			return "c2VjcmV0LWtleQ=="
		}
		return ""
	}
	for _, raw := range []string{
		"azblob://myacct/locks",
		"AZBLOB+HTTPS://myacct.blob.core.windows.net/locks?sv=1&sig=SIGSECRET",
		"azblob+http://127.0.0.1:10000/devstoreaccount1/locks",
	} {
		s, err := openStore(context.Background(), raw, lease.DashFlag, lease.OpenOptions{Getenv: getenv})
		if err != nil || s == nil {
			t.Fatalf("openStore(%q) = %v, %v", redact.URL(raw), s, err)
		}
		_ = s.Close()
	}
	s, err := openStore(context.Background(), "azblob://BAD/locks?sig=SIGSECRET", lease.DashFlag, lease.OpenOptions{Getenv: getenv})
	if s != nil || !errors.Is(err, lease.ErrConfig) {
		t.Fatalf("openStore(bad) = %v, %v; want nil store and ErrConfig", s, err)
	}
	if strings.Contains(err.Error(), "SIGSECRET") {
		t.Fatalf("error shows the SAS signature: %v", err)
	}
}
