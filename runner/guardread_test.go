package runner

import (
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// leaderrun killed before it read the guard's "ready": its end of the
// socket closes with that message unread, and the kernel then reports
// ECONNRESET to the guard's next read, ahead of the messages leaderrun sent
// first. The guard must still read them (the child's group), then the end;
// it once took the reset for the end and exited without killing the tree
// (seen beside stress-ng: the tree outlived leaderrun by minutes).
func TestGuardReadsPastReset(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := newSeqConn(fds[0], "owner")
	if err != nil {
		t.Fatal(err)
	}
	guard, err := newSeqConn(fds[1], "guard")
	if err != nil {
		t.Fatal(err)
	}
	defer guard.Close()
	if err := guard.WriteMsg([]byte(guardReady), nil); err != nil { // never read by the owner
		t.Fatal(err)
	}
	for _, m := range []string{"timing 15 3000000000 250000000 50000000", "pgid 4242"} {
		if err := owner.WriteMsg([]byte(m), nil); err != nil {
			t.Fatal(err)
		}
	}
	owner.Close() // leaderrun's death

	g := &guardProc{conn: guard}
	msgs, quit := make(chan guardMsg), make(chan struct{})
	defer close(quit)
	go g.read(msgs, quit)
	var got [][]string
	for m := range msgs {
		if m.err != nil {
			if errors.Is(m.err, unix.ECONNRESET) {
				t.Fatalf("after %q: the read ended with %v, before the owner's messages", got, m.err)
			}
			break
		}
		got = append(got, m.fields)
	}
	want := [][]string{{"timing", "15", "3000000000", "250000000", "50000000"}, {"pgid", "4242"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("read %q; want %q, then the end", got, want)
	}
}
