package dispatch

import (
	"os"
	"strconv"
	"testing"

	"github.com/leaderrun/leaderrun/runner"
	"golang.org/x/sys/unix"
)

// TestTakeGuardImage: a descriptor of the dispatching leaderrun's image is
// the guard program (trusted: no handshake before the child) only when that
// leaderrun speaks this build's guard protocol; either way it is made
// close-on-exec and the variables leave the environment.
func TestTakeGuardImage(t *testing.T) {
	f, err := os.Open(selfImage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	image := imageFDPrefix + strconv.Itoa(fd)
	for _, tc := range []struct {
		protocol, want string
	}{
		{runner.GuardProtocol(), image},
		{"protocol-0", ""}, // another build's leaderrun: the guard runs from this image
		{"", ""},
	} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			t.Fatal(err)
		}
		vars := []string{"A=1", EnvGuardProgram + "=" + image}
		if tc.protocol != "" {
			vars = append(vars, EnvGuardProtocol+"="+tc.protocol)
		}
		rest, o := Take(vars)
		if o.Guard != tc.want || !o.Dispatched || len(rest) != 1 || rest[0] != "A=1" {
			t.Errorf("protocol %q: Guard %q, Dispatched %v, rest %q; want %q, true, [A=1]", tc.protocol, o.Guard, o.Dispatched, rest, tc.want)
		}
		if !Trusted(o.GuardPath()) {
			t.Errorf("protocol %q: guard program %q not trusted", tc.protocol, o.GuardPath())
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("protocol %q: the image's descriptor is not close-on-exec (%v)", tc.protocol, err)
		}
	}
	if Trusted("/usr/bin/leaderrun") {
		t.Error("a guard program named by path is trusted without its handshake")
	}
}
