package etcdlease

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history (lease.History): each run of lease NAME is one key
//
//	PREFIX+NAME:runs/TOKEN    the JSON lease.Run, TOKEN in 16 digits (key order = token order)
//
// without an etcd lease. ':' is not in the lease-name alphabet, so no lease
// or standby key is ever a run key. A write is one transaction: put the run,
// then read the keys of the newest keep+1 runs; when there are keep+1 (the
// history was full and this run is new: its start record), a second request
// deletes every key from the oldest kept one down. The end record of a run
// replaces its start key and never grows the history, so the write after a
// release is one round trip.

var _ lease.History = (*Store)(nil)

func (s *Store) runKeys(name string) string { return s.key(name) + ":runs/" }

// RecordRun writes r into the history of r.Name (see lease.History).
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	keep = lease.HistoryKeep(keep)
	prefix := s.runKeys(r.Name)
	end := clientv3.GetPrefixRangeEnd(prefix)
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var tr *clientv3.TxnResponse
	err = s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		tr, err = cli.Txn(ctx).Then(
			clientv3.OpPut(fmt.Sprintf("%s%016d", prefix, r.Token), string(b)),
			clientv3.OpGet(prefix, clientv3.WithRange(end), clientv3.WithKeysOnly(),
				clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(keep)+1)),
		).Commit()
		return err
	})
	if err != nil {
		return s.classify("record run of "+r.Name, err)
	}
	kvs := tr.Responses[1].GetResponseRange().Kvs
	if len(kvs) <= keep {
		return nil
	}
	// Drop from the newest key beyond the cap down to the oldest.
	err = s.do(cctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Delete(ctx, prefix, clientv3.WithRange(string(kvs[keep].Key)+"\x00"))
		return err
	})
	if err != nil {
		return s.classify("trim the run history of "+r.Name, err)
	}
	return nil
}

// Runs returns up to limit runs of name, newest first (see lease.History).
// Values that do not parse (written by hand) are skipped.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	prefix := s.runKeys(name)
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var gr *clientv3.GetResponse
	err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		gr, err = cli.Get(ctx, prefix, opts...)
		return err
	})
	if err != nil {
		return nil, s.classify("read the run history of "+name, err)
	}
	runs := make([]lease.Run, 0, len(gr.Kvs))
	for _, kv := range gr.Kvs {
		var r lease.Run
		if json.Unmarshal(kv.Value, &r) == nil && r.Token != 0 {
			runs = append(runs, r)
		}
	}
	return runs, nil
}
