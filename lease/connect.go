package lease

import (
	"context"
	"time"
)

// Connector is an optional capability of a Store, or of a Lease, whose calls
// run on a connection that must be set up before the first one: TCP, TLS, a
// login (SCRAM, AUTH), an HTTP/2 preface, a token. Connect sets one up, or
// returns at once when one is ready, bounded by ctx alone; the next call
// uses it.
//
// The call timeout keeps the answer to an acquisition's write or a
// renewal inside the lease's safety margin. Set-up is no part of any
// lease's time: Acquire sends nothing the store could grant before it is
// done, and the Keeper reads a renewal's send time after it. So Acquire
// gives Connect what is left of the wait (at most SetupTimeout an attempt),
// and the Keeper what is left before the stop point, never beyond it; a
// loaded server's slow login is then a wait, not a failed call.
//
// Its errors are as TryAcquire's: ErrUnavailable for what retrying may fix,
// ErrConfig for refused credentials and the like.
type Connector interface {
	Connect(ctx context.Context) error
}

// SetupTimeout bounds one connection set-up (Connector.Connect) of
// Acquire, within the wait: a set-up that hangs (a half-open connection, a
// server that accepted and never answered) is dropped and tried again on a
// fresh connection. With a wait of 0 (one attempt), it is the set-up's only
// bound.
const SetupTimeout = 15 * time.Second

// connect sets up the store's connection before an attempt, when the
// store is a Connector and the attempt is not skipped: bounded by the
// wait (by SetupTimeout alone when the wait is 0, one attempt).
func (a *acquisition) connect() error {
	c, ok := a.s.(Connector)
	if !ok || a.seen != nil {
		return nil
	}
	parent := a.waitCtx
	if a.o.Wait == 0 {
		parent = a.ctx
	}
	cctx, cancel := context.WithTimeout(parent, SetupTimeout)
	defer cancel()
	return c.Connect(cctx)
}

// connect sets up the lease's connection (a Connector lease) before a
// renewal, bounded by ctx and the stop point. A wrapper (a slot's lease)
// passes its store's on (As).
func (k *Keeper) connect(ctx context.Context) error {
	c, ok := As[Connector](k.l)
	if !ok {
		return nil
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if k.cfg.Limits.Expires {
		cctx, cancel = context.WithTimeout(ctx, k.stopAt()-k.clock.Now())
	}
	defer cancel()
	return c.Connect(cctx)
}
