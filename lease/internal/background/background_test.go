package background

import (
	"sync/atomic"
	"testing"
)

func TestCloseWaitsAndRefuses(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var done atomic.Bool
	if !g.Go(func() { <-release; done.Store(true) }) {
		t.Fatal("Go on an open group refused")
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with work in flight")
	default:
	}
	close(release)
	<-closed
	if !done.Load() {
		t.Fatal("Close returned before the work ended")
	}
	if g.Go(func() { t.Error("ran after Close") }) {
		t.Fatal("Go after Close accepted")
	}
	g.Close() // idempotent
}
