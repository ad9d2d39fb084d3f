package filelease

import "os"

// LockFile returns the descriptor that holds the flock, or nil once the
// lease is released. leaderrun passes a duplicate of it to its guard process,
// so the kernel lock outlives leaderrun until the child's tree is gone; the
// caller must not close it. Release unlocks explicitly (LOCK_UN), so a
// duplicate held elsewhere never delays the handover.
func (l *fileLease) LockFile() *os.File {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lockf
}
