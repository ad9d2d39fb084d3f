package run

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The guard is forked with SIGHUP ignored, so that it ignores it from its
// exec on: a guard stopped when leaderrun dies is woken by the kernel with
// SIGHUP and SIGCONT, and one still starting up died of the SIGHUP and left
// the tree (seen beside stress-ng). Here the guard program is a script that
// reports the signals it was started with ignoring; leaderrun catches
// SIGHUP again once the guard is forked.
func TestGuardForkedIgnoringHangup(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report")
	if err := unix.Mkfifo(report, 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "guard")
	body := fmt.Sprintf("#!/bin/sh\ngrep SigIgn /proc/$$/status > %q\nexec cat\n", report)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &runState{rc: Config{GuardProgram: script}}
	r.catchSignals()
	defer r.close()
	f, err := os.Open(report) // blocks until the script opens it
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if mask&(1<<(syscall.SIGHUP-1)) == 0 {
		t.Fatalf("the guard started with SigIgn %#x: SIGHUP not ignored", mask)
	}
	r.pre.forked()
	if signal.Ignored(syscall.SIGHUP) {
		t.Fatal("leaderrun still ignores SIGHUP after the guard was forked")
	}
	g, err := r.pre.take()
	if err != nil {
		t.Fatal(err)
	}
	if !g.IgnoresHangup() {
		t.Fatal("Guard.IgnoresHangup is false for a guard forked while SIGHUP was ignored")
	}
	g.Disarm()
}
