package redislease

import (
	"context"
	_ "embed" // Lua script
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History) lives in one more key of the lease's hash slot:
//
//	leaderrun:{NAME}:runs  sorted set: member = a run's JSON record, score = its token
//
// A write is one script (history.lua): replace the run's record, drop the
// oldest beyond the cap, counting valid records only (lease.CheckRun), so an
// entry that is not one of leaderrun's records never pushes a run out. A
// read is one ZRANGE; what is not a valid record is skipped.

var (
	//go:embed history.lua
	historyLua    string
	historyScript = script(historyLua)
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
	skew := lease.MaxClockSkew.Microseconds()
	latest := time.Now().Add(lease.MaxClockSkew).UTC().Format("2006-01-02T15:04:05")
	if err := historyScript().Run(cctx, s.client, []string{runsKey(r.Name)}, tok, string(b), lease.HistoryKeep(keep), r.Name, skew, latest).Err(); err != nil {
		return s.classify("record run of "+r.Name, err)
	}
	return nil
}

// Runs returns up to limit runs of name, newest first (see lease.History).
// Members that are not valid records (written by hand, or forged to hide
// the real runs) are skipped: pages are read down from the highest score
// until limit valid ones are found.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	b := lease.RunBounds{Name: name, Now: time.Now(), ClockTokens: true}
	page := int64(max(limit, 100))
	var runs []lease.Run
	for seen := int64(0); ; seen += page {
		// The highest scores are the last ranks: ZRANGE with negative ranks
		// (ZREVRANGE would need one more ACL grant, ZRANGE REV Redis 6.2).
		first, last := -(seen + page), -(seen + 1)
		if limit <= 0 {
			first, last = 0, -1
		}
		raw, err := s.client.ZRangeWithScores(cctx, runsKey(name), first, last).Result()
		if err != nil {
			return nil, s.classify("read the run history of "+name, err)
		}
		for _, z := range slices.Backward(raw) {
			var r lease.Run
			m, _ := z.Member.(string)
			// A member whose token is not its score is none of leaderrun's.
			if json.Unmarshal([]byte(m), &r) == nil && float64(r.Token) == z.Score {
				runs = append(runs, r)
			}
		}
		runs = lease.NewestRuns(runs, b, limit)
		if limit <= 0 || len(runs) >= limit || int64(len(raw)) < page {
			return runs, nil
		}
	}
}
