package filelease

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestPasswdHome(t *testing.T) {
	db := "# comment:x:7:7::/nope:/bin/sh\nroot:x:0:0:root:/root:/bin/bash\nshort:x:7\nsvc:x:1007:1007:Svc,,,:/srv/svc:/usr/sbin/nologin\n"
	for _, c := range []struct {
		uid  int
		home string
		ok   bool
	}{{0, "/root", true}, {1007, "/srv/svc", true}, {7, "", false}, {100, "", false}} {
		home, ok := passwdHome(strings.NewReader(db), c.uid)
		if home != c.home || ok != c.ok {
			t.Errorf("uid %d: %q, %v; want %q, %v", c.uid, home, ok, c.home, c.ok)
		}
	}
}

// TestHomeDirAgreesWithGetent: for this process's uid, the lookup gives
// what the system's NSS lookup gives.
func TestHomeDirAgreesWithGetent(t *testing.T) {
	out, err := exec.Command("getent", "passwd", strconv.Itoa(os.Getuid())).Output()
	if err != nil {
		t.Skipf("getent: %v", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	if got := homeDir(os.Getuid()); got != f[5] {
		t.Fatalf("homeDir = %q; getent says %q", got, f[5])
	}
}
