package etcdlease

import (
	"context"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.SlotLister = (*Store)(nil)

// ListSlots returns the slots k ≥ 1 of lease name that have a key, in one
// range read of the keys PREFIX+NAME~… (keys only): only slots have a '~'
// after the name.
func (s *Store) ListSlots(ctx context.Context, name string) ([]int, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	from := s.key(name) + "~"
	var gr *clientv3.GetResponse
	err := s.do(cctx, func(ctx context.Context, cli *clientv3.Client) (err error) {
		gr, err = cli.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(from)), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return nil, s.classify("status "+name, err)
	}
	var ks []int
	for _, kv := range gr.Kvs {
		if base, k, ok := lease.ParseSlotName(string(kv.Key[len(s.cfg.prefix):])); ok && base == name {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks, nil
}
