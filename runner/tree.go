package runner

import (
	"errors"
	"syscall"
)

// tree is a child's process tree as the runner and the guard both handle
// it: its process group and, when there is one, its cgroup. The cgroup is
// authoritative (it holds even processes that left the group); the group
// is the unit without one, and a backstop with one.
type tree struct {
	pgid int     // the process group; 0 when there is none (not armed, or gone)
	cg   *Cgroup // nil without a cgroup
}

// signal sends a catchable sig once to each process of the tree: the
// cgroup's processes when there is one, else the process group.
func (t tree) signal(sig syscall.Signal) error {
	switch {
	case t.cg != nil:
		return t.cg.Signal(sig)
	case t.pgid > 0:
		return signalGroup(t.pgid, sig)
	}
	return nil
}

// kill SIGKILLs the whole tree: cgroup.kill, and the group as a backstop.
func (t tree) kill() error {
	var errs []error
	if t.cg != nil {
		errs = append(errs, t.cg.Kill())
	}
	if t.pgid > 0 {
		errs = append(errs, signalGroup(t.pgid, syscall.SIGKILL))
	}
	return errors.Join(errs...)
}

// alive reports whether anything of the tree may still run: a live member
// of the process group (reaping members that are our zombies) or, with a
// cgroup, any process in it (an unreadable cgroup counts as alive).
func (t tree) alive() bool {
	if t.pgid > 0 && groupAlive(t.pgid) {
		return true
	}
	if t.cg != nil {
		pop, err := t.cg.Populated()
		return err != nil || pop
	}
	return false
}
