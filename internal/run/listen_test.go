package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/boottime"
	"github.com/leaderrun/leaderrun/internal/listenwire"
)

// fakeListener is a listener whose leaderrun-listen is the test: states
// carries each State the run writes, and ack acknowledges one.
type fakeListener struct {
	l      *listener
	states chan listenwire.State
	ackW   io.WriteCloser
}

func newFakeListener(t *testing.T) *fakeListener {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	l := &listener{log: slog.New(slog.DiscardHandler), ackBound: listenAckBound, in: inW,
		bound: make(chan string, 1), acks: make(chan uint64, 1), dirty: make(chan struct{}, 1), quit: make(chan struct{})}
	f := &fakeListener{l: l, states: make(chan listenwire.State, 64), ackW: outW}
	l.wg.Add(2)
	go l.read(outR)
	go l.write()
	read := make(chan struct{})
	go func() { // ends when the writer closes its end
		defer close(read)
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			var st listenwire.State
			if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
				t.Errorf("a state line that does not parse: %q", sc.Text())
				continue
			}
			f.states <- st
		}
	}()
	fmt.Fprintln(outW, "bound 127.0.0.1:1")
	t.Cleanup(func() {
		close(l.quit)
		outW.Close()
		l.wg.Wait()
		<-read
	})
	return f
}

// until returns the first state written with role.
func (f *fakeListener) until(t *testing.T, role string) listenwire.State {
	t.Helper()
	for {
		select {
		case st := <-f.states:
			if st.Role == role {
				return st
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no state with role %s written", role)
		}
	}
}

// The child is stopped (the gate's context ends) only once
// leaderrun-listen has acknowledged "stopping", with the cause of the
// leadership's end: /leader has turned 503 before the signal.
func TestListenGateWaitsForAck(t *testing.T) {
	t.Parallel()
	f := newFakeListener(t)
	f.l.ackBound = time.Hour // only the acknowledgement opens the gate here
	f.l.started()
	parent, lose := context.WithCancelCause(context.Background())
	gated, ungate := f.l.gate(parent, func() time.Duration { return 0 })
	defer ungate()
	lost := errors.New("lost")
	lose(lost)
	st := f.until(t, listenwire.RoleStopping)
	select {
	case <-gated.Done():
		t.Fatal("the child would be stopped before leaderrun-listen acknowledged the stop")
	case <-time.After(50 * time.Millisecond): // a gate that does not wait ends at once
	}
	fmt.Fprintf(f.ackW, "ack %d 1\n", st.Seq)
	<-gated.Done()
	if cause := context.Cause(gated); !errors.Is(cause, lost) {
		t.Fatalf("the gate's cause is %v; want the leadership's, %v", cause, lost)
	}
}

// Without an acknowledgement the gate opens at the lease's stop point
// when that comes before the bound: the deadline wins.
func TestListenGateNeverPastStopPoint(t *testing.T) {
	t.Parallel()
	f := newFakeListener(t)
	f.l.ackBound = time.Hour
	f.l.started()
	clock := boottime.Boot{}
	stopAt := clock.Now() + 30*time.Millisecond
	parent, lose := context.WithCancelCause(context.Background())
	gated, ungate := f.l.gate(parent, func() time.Duration { return stopAt })
	defer ungate()
	lose(errors.New("lost"))
	select {
	case <-gated.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the gate held the stop back past the stop point")
	}
	if now := clock.Now(); now < stopAt {
		t.Fatalf("the gate opened %v before the stop point without an acknowledgement", stopAt-now)
	}
}

// A child that never started has nothing /leader vouched for: the gate
// does not wait.
func TestListenGateBeforeStart(t *testing.T) {
	t.Parallel()
	f := newFakeListener(t)
	f.l.ackBound = time.Hour
	parent, lose := context.WithCancelCause(context.Background())
	gated, ungate := f.l.gate(parent, func() time.Duration { return 0 })
	defer ungate()
	lose(errors.New("lost"))
	select {
	case <-gated.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the gate waited for an acknowledgement with no child started")
	}
}

func TestListenAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		":8080":             "127.0.0.1:8080",
		"0.0.0.0:80":        "0.0.0.0:80",
		"[::1]:9000":        "[::1]:9000",
		"localhost:0":       "localhost:0",
		"unix:/run/lr.sock": "unix:/run/lr.sock",
		"8080":              "",
		":http":             "",
		":65536":            "",
		":-1":               "",
		"::1:80":            "",
		"unix:":             "",
		"a b:80":            "",
	} {
		got, err := ListenAddr(in, nil)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
		if err != nil && !errors.Is(err, ErrUsage) {
			t.Errorf("ListenAddr(%q): %v is not a usage error", in, err)
		}
	}
}
