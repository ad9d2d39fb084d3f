package etcdlease

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History): each run of lease NAME is one key
//
//	PREFIX+NAME:runs/TOKEN    the JSON lease.Run, TOKEN in 16 digits (key order = token order)
//
// without an etcd lease. ':' is not in the lease-name alphabet, so no lease
// or standby key is ever a run key. A key is a valid record only when its
// TOKEN is 16 digits, its value a valid lease.Run (lease.CheckRun) of NAME
// with that token, and the token below the key's own create revision: the
// token is the create revision of the lease key, which was created before
// any record of the run. So a key written by hand, or forged with a token
// above the real ones to push them out, is no run: it never counts towards
// the cap, readers skip it, and the trim deletes the ones it meets.
//
// A start record is one transaction: put the run unless its key exists
// (the end may be there already: see below), and count the keys of the
// history. When they number more than keep + slack (slack = keep/10 + 1),
// a second request reads the newest keys with their values, and a third
// deletes every key below the keep-th valid record and the invalid keys
// above it. So the history holds from keep to keep + slack + 1 keys, and
// the trim, a Raft write of its own, comes once every slack + 1 runs, not
// at every run. An end record is a put that replaces its start key
// (leaderrun writes a start before every end): one of its own, or part of
// the release's transaction (ReleaseEnding), which may commit before the
// start it replaces, whose transaction then writes nothing. One that finds
// no start (its start failed, or was trimmed) stays until the next start's
// trim.

var _ lease.History = (*Store)(nil)

func (s *Store) runKeys(name string) string { return s.key(name) + ":runs/" }

// runKey is the key of a run record.
func runKey(prefix string, token uint64) string { return fmt.Sprintf("%s%016d", prefix, token) }

// validRun decodes kv as a run record of name under prefix; false when it is
// not a valid one (see the comment at the top).
func validRun(kv *mvccpb.KeyValue, prefix string, b lease.RunBounds) (lease.Run, bool) {
	var r lease.Run
	suffix := string(kv.Key[min(len(prefix), len(kv.Key)):])
	tok, err := strconv.ParseUint(suffix, 10, 64)
	if err != nil || len(suffix) != 16 || json.Unmarshal(kv.Value, &r) != nil ||
		r.Token != tok || int64(min(tok, 1<<62)) >= kv.CreateRevision || lease.CheckRun(r, b) != nil {
		return lease.Run{}, false
	}
	return r, true
}

// RecordRun writes r into the history of r.Name (see lease.History).
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	keep = lease.HistoryKeep(keep)
	prefix := s.runKeys(r.Name)
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var tr *clientv3.TxnResponse
	err = s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		key := runKey(prefix, r.Token)
		put := clientv3.OpPut(key, string(b))
		if r.Ended() {
			_, err = cli.Do(ctx, put)
			return err
		}
		// A start never replaces a record: the end may be there already,
		// written with the release (ReleaseEnding) while this was on its way.
		count := clientv3.OpGet(prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithCountOnly())
		tr, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(put, count).Else(count).Commit()
		return err
	})
	if err != nil {
		return s.classify("record run of "+r.Name, err)
	}
	if tr == nil || tr.Responses[len(tr.Responses)-1].GetResponseRange().Count <= int64(keep+slack(keep)) {
		return nil // an end, or nothing beyond the cap and its slack, whatever is valid
	}
	if err := s.trimRuns(cctx, r.Name, keep); err != nil {
		return s.classify("trim the run history of "+r.Name, err)
	}
	return nil
}

// slack is how many runs beyond keep a history may gain before a start
// record trims it.
func slack(keep int) int { return keep/10 + 1 }

// trimRuns deletes the keys of name's history below its keep-th valid
// record, and the invalid ones above it, reading pages down from the
// newest key. Nothing is deleted while fewer than keep valid records exist.
func (s *Store) trimRuns(ctx context.Context, name string, keep int) error {
	prefix := s.runKeys(name)
	b := lease.RunBounds{Name: name, Now: time.Now()}
	var bad []string
	valid := 0
	below := clientv3.GetPrefixRangeEnd(prefix)
	for {
		var kvs []*mvccpb.KeyValue
		err := s.do(ctx, func(ctx context.Context, cli *clientv3.Client) error {
			gr, err := cli.Get(ctx, prefix, clientv3.WithRange(below),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(keep)+1))
			if err == nil {
				kvs = gr.Kvs
			}
			return err
		})
		if err != nil || len(kvs) == 0 {
			return err
		}
		for _, kv := range kvs {
			if _, ok := validRun(kv, prefix, b); !ok {
				bad = append(bad, string(kv.Key))
				continue
			}
			if valid++; valid < keep {
				continue
			}
			// The keep-th valid record: below it, everything goes.
			return s.deleteRuns(ctx, append([]clientv3.Op{clientv3.OpDelete(prefix, clientv3.WithRange(string(kv.Key)))}, opsDelete(bad)...))
		}
		// More invalid keys than the page held: read on below.
		below = string(kvs[len(kvs)-1].Key)
	}
}

// opsDelete returns a delete of each key.
func opsDelete(keys []string) []clientv3.Op {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpDelete(k)
	}
	return ops
}

// deleteRuns runs ops in transactions of at most 100 (etcd takes at most
// 128 operations in one by default).
func (s *Store) deleteRuns(ctx context.Context, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), 100)
		err := s.do(ctx, func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.Txn(ctx).Then(ops[:n]...).Commit()
			return err
		})
		if err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// Runs returns up to limit runs of name, newest first (see lease.History).
// Keys that are not valid records (written by hand, or forged) are skipped:
// pages are read down from the newest key until limit valid ones are found.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	prefix := s.runKeys(name)
	b := lease.RunBounds{Name: name, Now: time.Now()}
	page := int64(max(limit, 100))
	if limit <= 0 {
		page = 0 // all at once
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	runs := []lease.Run{}
	end := clientv3.GetPrefixRangeEnd(prefix)
	for {
		var gr *clientv3.GetResponse
		err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
			gr, err = cli.Get(ctx, prefix, clientv3.WithRange(end), clientv3.WithLimit(page),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
			return err
		})
		if err != nil {
			return nil, s.classify("read the run history of "+name, err)
		}
		for _, kv := range gr.Kvs {
			if r, ok := validRun(kv, prefix, b); ok {
				runs = append(runs, r)
				if len(runs) == limit {
					return runs, nil
				}
			}
		}
		if !gr.More || len(gr.Kvs) == 0 {
			return runs, nil
		}
		end = string(gr.Kvs[len(gr.Kvs)-1].Key)
	}
}
