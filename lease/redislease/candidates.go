package redislease

import (
	"context"
	_ "embed" // Lua scripts
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeopt"
	"github.com/redis/go-redis/v9"
)

// Standbys (lease.CandidateRegistry). The waiting instances of lease NAME are
// two keys in the lease's hash slot:
//
//	leaderrun:{NAME}:candidates      sorted set: candidate ID → expiry (server clock, ms)
//	leaderrun:{NAME}:candidates:rec  hash: candidate ID → JSON {holder, priority, since}
//
// A heartbeat is one script (join.lua) that refreshes the candidate's expiry,
// drops lapsed candidates and says how many are live; lease.Acquire spaces
// heartbeats so that all the standbys of a lease together send at most
// heartbeatsPerSecond of them. Listing (candidates.lua) reads the holder
// record, its PTTL and the live candidates in one script, so a waiter that
// wakes reads everything it needs to decide in the round trip that replaces
// the attempt it would otherwise make.
//
// Changes are announced, best effort, on leaderrun:{NAME}:changed (a new
// holder, a standby joining or leaving) besides the release channel, for
// watchers; nobody waiting for the lease listens to it.

var (
	//go:embed join.lua
	joinLua string
	//go:embed leave.lua
	leaveLua string
	//go:embed candidates.lua
	candidatesLua string

	joinScript       = script(joinLua)
	leaveScript      = script(leaveLua)
	candidatesScript = script(candidatesLua)
)

// heartbeatsPerSecond is the budget of heartbeats of all the standbys of one
// lease together: a fleet of 50 standbys must add at most 5 commands a
// second to the server.
const heartbeatsPerSecond = 3

var _ lease.CandidateRegistry = (*Store)(nil)

func candidatesKey(name string) string  { return "leaderrun:{" + name + "}:candidates" }
func candRecordsKey(name string) string { return "leaderrun:{" + name + "}:candidates:rec" }
func changedChan(name string) string    { return "leaderrun:{" + name + "}:changed" }

// candRecord is a candidate's JSON in the records hash.
type candRecord struct {
	Holder   string    `json:"holder"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
}

// Join registers or refreshes c for expiry (server clock) and returns the
// number of live candidates. A new candidate is announced on the changed
// channel.
func (s *Store) Join(ctx context.Context, name string, c lease.Candidate, expiry time.Duration) (int, error) {
	rec, err := json.Marshal(candRecord{Holder: c.Label, Priority: c.Priority, Since: c.Since.UTC()})
	if err != nil {
		return 0, err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	res, err := joinScript().Run(cctx, s.client, []string{candidatesKey(name), candRecordsKey(name)}, c.ID, storeopt.Millis(expiry), rec).Int64Slice()
	if err != nil {
		return 0, s.classify("join standbys of "+name, err)
	}
	if len(res) != 2 {
		return 0, lease.NewError(fmt.Sprintf("%s: join standbys of %s: unexpected script answer %v", s.where, name, res))
	}
	if res[1] == 1 {
		s.announce(name)
	}
	return int(res[0]), nil
}

// Leave removes the candidate id and announces it. It returns at once and
// leaves from a goroutine the Store owns (Close waits for it, at most a call
// timeout): Acquire leaves right after winning the lease, and the child
// should not wait for a round trip that only tidies the list. A failure is
// logged at debug level; the registration then lapses by itself.
func (s *Store) Leave(ctx context.Context, name, id string) error {
	leave := func(ctx context.Context) error {
		cctx, cancel := s.callCtx(ctx)
		defer cancel()
		n, err := leaveScript().Run(cctx, s.client, []string{candidatesKey(name), candRecordsKey(name)}, id).Int64()
		if err != nil {
			return s.classify("leave standbys of "+name, err)
		}
		if n == 1 {
			s.publishChanged(cctx, name)
		}
		return nil
	}
	s.bg.Go(func() {
		if err := leave(context.WithoutCancel(ctx)); err != nil {
			s.log.Debug("leaving the standbys failed; the registration lapses by itself", "err", err)
		}
	})
	return nil
}

// Candidates returns the live standbys of name in takeover order and the
// holder (nil when free), read in one script. The holder's own candidacy,
// if it is still registered, is left out.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Candidate, *lease.Holder, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	res, err := candidatesScript().Run(cctx, s.client, []string{recordKey(name), candidatesKey(name), candRecordsKey(name)}).Slice()
	if err != nil {
		return nil, nil, s.classify("standbys of "+name, err)
	}
	if len(res) < 3 || (len(res)-3)%3 != 0 {
		return nil, nil, lease.NewError(fmt.Sprintf("%s: standbys of %s: unexpected script answer", s.where, name))
	}
	var (
		h        *lease.Holder
		holderID string
	)
	if raw, ok := res[0].(string); ok {
		pttl, _ := res[1].(int64)
		hh := holderOf(name, raw, pttl)
		h = &hh
		var r struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal([]byte(raw), &r)
		holderID = r.ID
	}
	now, _ := res[2].(int64)
	var cs []lease.Candidate
	for i := 3; i+2 < len(res); i += 3 {
		id, _ := res[i].(string)
		score, _ := res[i+1].(string)
		raw, _ := res[i+2].(string)
		if id == "" || id == holderID {
			continue
		}
		var r candRecord
		if json.Unmarshal([]byte(raw), &r) != nil {
			continue // not ours: skip rather than fail the listing
		}
		c := lease.Candidate{ID: id, Label: r.Holder, Priority: r.Priority, Since: r.Since}
		if exp, err := strconv.ParseFloat(score, 64); err == nil && int64(exp) > now {
			c.Remaining = time.Duration(int64(exp)-now) * time.Millisecond
		}
		cs = append(cs, c)
	}
	lease.SortCandidates(cs)
	return cs, h, nil
}

// CandidateTiming: heartbeats within heartbeatsPerSecond, at least a second
// apart; δ covers a better standby woken by the release channel or its PTTL
// timer (jitter up to 26ms), one listing and one attempt, with room for a
// loaded host. Without the release channel waiters poll every noChannelPoll,
// which δ must cover too.
func (s *Store) CandidateTiming() lease.CandidateTiming {
	step := 200 * time.Millisecond
	if s.noChannel.Load() {
		step += noChannelPoll
	}
	return lease.CandidateTiming{Heartbeat: true, PerSecond: heartbeatsPerSecond, MinInterval: time.Second, Step: step}
}

// announce publishes on the changed channel from a goroutine the Store owns,
// so that no acquisition or registration waits for it; Close waits for it
// (at most a call timeout), so an instance that exits right after leaving
// still tells watchers. It is a hint: failures are logged at debug level.
func (s *Store) announce(name string) {
	if s.noChannel.Load() {
		return
	}
	s.bg.Go(func() {
		ctx, cancel := s.callCtx(context.Background())
		defer cancel()
		s.publishChanged(ctx, name)
	})
}

// publishChanged publishes on the changed channel, best effort.
func (s *Store) publishChanged(ctx context.Context, name string) {
	if s.noChannel.Load() {
		return
	}
	err := s.client.Publish(ctx, changedChan(name), "changed").Err()
	if redis.IsPermissionError(err) {
		s.noChannel.Store(true)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("change notification not sent; watchers see it at their next check", "err", s.classify("publish", err))
	}
}
