package runner

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalGroup sends sig to every process in the group. ESRCH (the group is
// already empty) is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := unix.Kill(-pgid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// groupAlive reports whether the process group still has a member that can run.
//
// kill(-pgid, 0) counts zombies, and a zombie stays until its parent reaps it:
// init normally does that at once, but some container inits never do. So when
// kill says the group exists, we first reap any zombies that are our own
// children (we are PID 1 or a subreaper), then look in /proc: a group whose
// remaining members are all zombies is gone for every practical purpose (a
// zombie runs no code and holds no locks). When /proc cannot be read the group
// is reported alive, i.e. not confirmed gone.
func groupAlive(pgid int) bool {
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	for {
		// wait4(-pgid) only ever reaps members of this group, which are our
		// children only if they were re-parented to us; the leader has been
		// waited for already.
		pid, err := unix.Wait4(-pgid, nil, unix.WNOHANG, nil)
		if err != nil || pid <= 0 {
			break
		}
	}
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	live, err := liveMembers(pgid)
	return err != nil || live
}

// liveMembers scans /proc for a process in group pgid that is not a zombie.
func liveMembers(pgid int) (bool, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return false, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	want := strconv.Itoa(pgid)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited while we looked
		}
		// Fields after "(comm)": state ppid pgrp ...; comm may contain spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[2]) != want {
			continue
		}
		if st := f[0]; len(st) == 1 && (st[0] == 'Z' || st[0] == 'X') {
			continue
		}
		return true, nil
	}
	return false, nil
}
