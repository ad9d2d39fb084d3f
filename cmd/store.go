package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// storeOptions is what every store opener gets besides the URL.
type storeOptions struct {
	// CallTimeout bounds one store call (DESIGN §3.4); stores derive their
	// dial/read/write and per-try timeouts from it.
	CallTimeout time.Duration
	// Getenv reads the environment (credentials such as REDISCLI_AUTH or
	// AZURE_STORAGE_KEY); tests replace it.
	Getenv func(string) string
	// Log is leaderrun's logger.
	Log *slog.Logger
}

// storeOpener opens the store named by a --store URL. It must never put a
// secret from raw into an error.
type storeOpener func(ctx context.Context, raw string, o storeOptions) (lease.Store, error)

// storeOpeners maps a URL scheme to its opener. Each store registers itself
// from its own cmd/store_*.go file.
var storeOpeners = map[string]storeOpener{}

// openStore picks the store for raw by its scheme.
func openStore(ctx context.Context, raw string, o storeOptions) (lease.Store, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("%w: --store %q: want a URL such as file:///var/lock/leaderrun or redis://host:6379", lease.ErrConfig, redactURL(raw))
	}
	open, ok := storeOpeners[strings.ToLower(scheme)]
	if !ok {
		return nil, fmt.Errorf("%w: --store %q: unknown scheme %q", lease.ErrConfig, redactURL(raw), scheme)
	}
	return open(ctx, raw, o)
}

// redactURL hides passwords and SAS signatures in a store URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	changed := false
	for k := range q {
		switch strings.ToLower(k) {
		case "sig", "password", "key", "accountkey", "sas":
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}
