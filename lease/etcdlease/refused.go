package etcdlease

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
)

// refused reports, before a call to a cluster that has never answered,
// whether every endpoint refuses TCP connections outright (connection
// refused, no route to the host or network), and returns that dial error.
// The client's calls wait for a ready connection until their deadline, so a
// refusing cluster would otherwise read "no answer in time" after the whole
// call timeout, while Redis and PostgreSQL say "connection refused" at once.
// An endpoint that accepts, or does not answer before ctx ends, is no
// refusal: the call then goes ahead as usual. Once the cluster has answered
// a call, an outage is left to the client (it reconnects) and the keeper.
func (s *Store) refused(ctx context.Context) error {
	if s.plain.answered.Load() {
		return nil
	}
	errs := make([]error, len(s.cfg.endpoints))
	var wg sync.WaitGroup
	for i, ep := range s.cfg.endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", ep)
			if err == nil {
				_ = conn.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ENETUNREACH) {
			return nil
		}
	}
	return errs[0]
}
