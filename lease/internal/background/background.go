// Package background runs the work a store does after a call has returned
// (a standby's Leave right after it won the lease, a change announcement)
// on goroutines the store owns: the store's Close refuses new work and
// waits for the work in flight, each piece bounded by the store's call
// timeout.
package background

import "sync"

// Group is a store's background work. The zero value is ready to use.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs fn on a goroutine g owns and reports true or, once g is closed,
// does nothing and reports false.
func (g *Group) Go(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn()
	}()
	return true
}

// Close refuses new work and waits for the work in flight. It is
// idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
