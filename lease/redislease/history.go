package redislease

import (
	"context"
	_ "embed" // Lua script
	"encoding/json"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History) lives in one more key of the lease's hash slot:
//
//	leaderrun:{NAME}:runs  sorted set: member = a run's JSON record, score = its token
//
// A write is one script (history.lua): replace the run's record, drop the
// oldest beyond the cap. A read is one ZRANGE.

var (
	//go:embed history.lua
	historyLua    string
	historyScript = redis.NewScript(historyLua)
)

var _ lease.History = (*Store)(nil)

func runsKey(name string) string { return "leaderrun:{" + name + "}:runs" }

// RecordRun writes r into the history of r.Name in one round trip (see
// lease.History).
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	tok := strconv.FormatUint(r.Token, 10)
	if err := historyScript.Run(cctx, s.client, []string{runsKey(r.Name)}, tok, string(b), lease.HistoryKeep(keep)).Err(); err != nil {
		return s.classify("record run of "+r.Name, err)
	}
	return nil
}

// Runs returns up to limit runs of name, newest first (see lease.History).
// Members that do not parse (written by hand) are skipped.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	// The highest scores are the last ranks: ZRANGE with negative ranks
	// (ZREVRANGE would need one more ACL grant, ZRANGE REV Redis 6.2).
	first := int64(0)
	if limit > 0 {
		first = -int64(limit)
	}
	raw, err := s.client.ZRange(cctx, runsKey(name), first, -1).Result()
	if err != nil {
		return nil, s.classify("read the run history of "+name, err)
	}
	slices.Reverse(raw)
	runs := make([]lease.Run, 0, len(raw))
	for _, m := range raw {
		var r lease.Run
		if json.Unmarshal([]byte(m), &r) == nil && r.Token != 0 {
			runs = append(runs, r)
		}
	}
	return runs, nil
}
