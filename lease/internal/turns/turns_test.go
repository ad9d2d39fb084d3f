package turns

import (
	"context"
	"errors"
	"testing"
	"time"
)

type fakeConn struct{ dropped, closed bool }

func newConn() *Conn[*fakeConn] {
	return New(func(c *fakeConn) { c.dropped = true })
}

// connected returns a Conn with a connection.
func connected() (*Conn[*fakeConn], *fakeConn) {
	tc, c := newConn(), &fakeConn{}
	tc.Set(c)
	return tc, c
}

// mustBeDropped fails t unless tc's connection c was dropped.
func mustBeDropped(t *testing.T, tc *Conn[*fakeConn], c *fakeConn, after string) {
	t.Helper()
	if tc.Get() != nil || !c.dropped {
		t.Fatalf("%s: the connection was kept", after)
	}
}

func TestTakeWaitsForTheTurn(t *testing.T) {
	tc := newConn()
	if err := tc.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tc.Take(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Take while the turn is taken: %v; want the context's deadline", err)
	}
	if n := tc.queued.Load(); n != 0 {
		t.Fatalf("queued after a Take gave up: %d", n)
	}
	tc.Give()
	if err := tc.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	tc.Give()
}

func TestDisconnectLeavesTheConnectionToAQueuedCall(t *testing.T) {
	tc, c := connected()
	if err := tc.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	took := make(chan struct{})
	go func() { // a call waiting for the turn
		if err := tc.Take(context.Background()); err == nil {
			close(took)
		}
	}()
	for tc.queued.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	disconnected := make(chan struct{})
	go func() {
		tc.Disconnect()
		close(disconnected)
	}()
	tc.Give()
	select {
	case <-took: // the queued call has the turn, with the connection
		if tc.Get() != c || c.dropped {
			t.Fatal("the connection was dropped under a queued call")
		}
		tc.Give()
		<-disconnected
	case <-disconnected: // Disconnect won the turn while the call was still queued
		if tc.Get() != c || c.dropped {
			t.Fatal("Disconnect dropped the connection a queued call waits for")
		}
		<-took
		tc.Give()
	}
	tc.Disconnect() // nobody queued now
	mustBeDropped(t, tc, c, "Disconnect with nobody queued")
}

func TestIdleKeepsTheConnectionWhileALeaseIsHeld(t *testing.T) {
	tc, c := connected()
	l := tc.Hold()
	tc.Idle()
	if !tc.Held() || tc.Get() != c {
		t.Fatal("Idle dropped the connection of a held lease")
	}
	l.Done()
	l.Done() // counted out once
	if tc.Held() {
		t.Fatal("still held after Done")
	}
	var never *Lease
	never.Done()
	l2 := tc.Hold()
	tc.Idle()
	if tc.Get() != c {
		t.Fatal("a second Done counted another lease out")
	}
	l2.Done()
	tc.Idle()
	mustBeDropped(t, tc, c, "Idle without a held lease")
}

func TestShutAndCloseConn(t *testing.T) {
	tc, c := connected()
	if tc.Closed() {
		t.Fatal("closed before Shut")
	}
	if !tc.Shut() || tc.Shut() {
		t.Fatal("Shut does not report its first call alone")
	}
	if !tc.Closed() || tc.Life().Err() == nil {
		t.Fatal("Shut left the Conn open or its Life running")
	}
	tc.CloseConn(func(c *fakeConn) { c.closed = true })
	if tc.Get() != nil || !c.closed || c.dropped {
		t.Fatalf("CloseConn: connection kept %v, closed %v, dropped %v; want closed by CloseConn's func", tc.Get() != nil, c.closed, c.dropped)
	}
	// After Shut, Disconnect neither blocks nor needs the turn.
	if err := tc.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	tc.Disconnect()
	tc.Give()
}
