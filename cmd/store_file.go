package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/internal/redact"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/filelease"
)

// openFileStore opens file:///abs/dir, or file:///abs/dir?shared=world for
// a directory every user may write (filelease.Options.World).
// spell names the flag in messages.
func openFileStore(_ context.Context, raw string, spell lease.FlagSpeller, _ lease.OpenOptions) (lease.Store, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Host != "" && u.Host != "localhost") || u.User != nil || u.Path == "" || u.ForceQuery {
		return nil, lease.NewError(fmt.Sprintf("%s is not a file store URL: want file:///absolute/directory", spell("store", strconv.Quote(redact.URL(raw)))), lease.ErrConfig)
	}
	var o filelease.Options
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil || len(q) != 1 || len(q["shared"]) != 1 || q.Get("shared") != "world" {
			return nil, lease.NewError(fmt.Sprintf("%s: a file store URL takes one parameter, shared=world (a directory every user may write, such as /run/lock: see docs/stores.md)", spell("store", strconv.Quote(redact.URL(raw)))), lease.ErrConfig)
		}
		o.World = true
	}
	// A '#' would otherwise cut the path silently: file:///locks#2 is not
	// the directory /locks.
	if strings.Contains(raw, "#") {
		return nil, lease.NewError(fmt.Sprintf("%s: a file store URL cannot have a #fragment (write %%23 for a '#' in the directory name)", spell("store", strconv.Quote(redact.URL(raw)))), lease.ErrConfig)
	}
	return filelease.OpenWith(u.Path, o)
}

// readCallTimeout bounds one store call of the read-only commands (status,
// watch, history): nothing's safety rests on their answers, so a loaded
// store gets the time a person would give it.
const readCallTimeout = 5 * time.Second

// openForReading opens --store for a read-only command and sets up its
// connection (lease.Connector) within lease.SetupTimeout, as a run's
// acquisition does: a loaded server's slow login (seen: PostgreSQL taking
// 5s to log in beside a fleet of 100 standbys) is a wait, not a failed
// first call.
func openForReading(ctx context.Context, raw string, spell lease.FlagSpeller, e env, log *slog.Logger) (lease.Store, error) {
	store, err := openStoreFor(ctx, raw, spell, lease.OpenOptions{CallTimeout: readCallTimeout, Getenv: e.getenv, Log: log})
	if err != nil {
		return nil, err
	}
	if c, ok := store.(lease.Connector); ok {
		cctx, cancel := context.WithTimeout(ctx, lease.SetupTimeout)
		defer cancel()
		if err := c.Connect(cctx); err != nil {
			_ = store.Close()
			return nil, err
		}
	}
	return store, nil
}

// openStoreFor opens --store, or the per-user file store when it is empty;
// spell names the flag in messages.
func openStoreFor(ctx context.Context, raw string, spell lease.FlagSpeller, o lease.OpenOptions) (lease.Store, error) {
	if raw == "" {
		dir, err := filelease.DefaultDir()
		if err != nil {
			return nil, err
		}
		return filelease.Open(dir)
	}
	return openStore(ctx, raw, spell, o)
}
