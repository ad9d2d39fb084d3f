package filelease

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// homeDir returns uid's home directory from the password database: the
// file /etc/passwd first, then `getent passwd UID`, which asks every NSS
// source (LDAP, sssd, systemd-userdb) as libc would. os/user does the same
// through libc, but linking it makes leaderrun a dynamically linked program
// that loads libc on every run (docs/performance.md, start-up cost), for
// the one question DefaultDir asks.
func homeDir(uid int) string {
	if f, err := os.Open("/etc/passwd"); err == nil {
		home, ok := passwdHome(f, uid)
		f.Close()
		if ok {
			return home
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "getent", "passwd", strconv.Itoa(uid)).Output()
	if err != nil {
		return ""
	}
	home, _ := passwdHome(bytes.NewReader(out), uid)
	return home
}

// passwdHome finds uid's entry in passwd(5) lines and returns its home
// directory; ok is false when there is no entry.
func passwdHome(r io.Reader, uid int) (home string, ok bool) {
	want := strconv.Itoa(uid)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 7 && f[2] == want && !strings.HasPrefix(f[0], "#") {
			return f[5], true
		}
	}
	return "", false
}
