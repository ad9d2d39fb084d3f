// Package dispatch hands a run to the program that serves its store, and
// tells that program which leaderrun handed it over. The leaderrun program
// links only the file store; every other store is served by a program of
// its own (leaderrun-redis, ...), so that a run pays the start-up cost of
// exactly the store it uses. The store program's guard runs from the
// dispatching leaderrun's image, the smaller program.
package dispatch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
	"golang.org/x/sys/unix"
)

// Origin is what the leaderrun that dispatched the run to this program
// said (Take); the zero Origin is a program started directly.
type Origin struct {
	// Guard is the program the guard runs from, when not this one.
	Guard string
	// Dispatched is true when a leaderrun dispatched the run to this
	// program: this program must then serve the store itself.
	Dispatched bool
}

// GuardPath is the program the guard runs from: this one, unless a
// leaderrun dispatched the run to this program.
func (o Origin) GuardPath() string {
	if o.Guard == "" {
		return selfImage
	}
	return o.Guard
}

// Exec hands the whole run to prog, the program that serves scheme: it
// replaces this process (same PID, same arguments, environment and
// descriptors: nothing has started yet) and returns only on failure.
// dispatched is Origin.Dispatched: this program was itself dispatched to.
func Exec(scheme, prog string, argv, environ []string, dispatched bool) error {
	path, err := Find(prog)
	if err != nil {
		return err
	}
	// A program that was itself dispatched to, and does not link the
	// scheme either, is not the store program it was named as (a link or
	// copy of leaderrun under that name): dispatching again would exec
	// the same program forever.
	if dispatched {
		return lease.NewError(fmt.Sprintf("%s:// URLs are served by %s, but the %s found there does not link this store (a link to or copy of leaderrun? a mismatched installation)", scheme, prog, path), lease.ErrConfig)
	}
	// The store program's guard runs from this very image, passed as a
	// descriptor that survives the execve: a guard of this build whatever
	// happens to the file meanwhile, so with this build's protocol named
	// too, the store program's child need not wait for its handshake.
	image := -1
	if f, err := os.Open(selfImage); err == nil {
		// A duplicate without close-on-exec, numbered above the
		// descriptors a guard is started with (0-3), which would
		// otherwise replace it before the guard's exec.
		if fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD, 10); err == nil {
			image = fd
			environ = append(environ, EnvGuardProgram+"="+imageFDPrefix+strconv.Itoa(fd),
				EnvGuardProtocol+"="+runner.GuardProtocol()) // Take takes them out again
		}
		f.Close()
	}
	if image < 0 {
		if self, err := os.Executable(); err == nil {
			environ = append(environ, EnvGuardProgram+"="+self) // Take takes it out again
		}
	}
	err = syscall.Exec(path, argv, environ)
	if image >= 0 {
		unix.Close(image)
	}
	return lease.NewError(fmt.Sprintf("%s:// URLs are served by %s, which could not be started: %v", scheme, path, err), lease.ErrConfig)
}

// Find looks for prog next to the running program, then on PATH (as
// git finds git-*), never this program itself.
func Find(prog string) (string, error) {
	self, err := os.Executable()
	if err == nil {
		if filepath.Base(self) == prog {
			return "", lease.NewError(fmt.Sprintf("%s does not serve this URL scheme (a mismatched installation?)", prog), lease.ErrConfig)
		}
		p := filepath.Join(filepath.Dir(self), prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(prog); err == nil {
		return p, nil
	}
	return "", lease.NewError(fmt.Sprintf("this store is served by the program %s, which is neither next to %s nor on PATH; keep every leaderrun* program of a release in one directory, or build them all from a clone with: go build -o DIR/ . ./cmd/...", prog, self), lease.ErrConfig)
}

// EnvGuardProgram tells a store program which leaderrun dispatched to it:
// that smaller program of the same installation runs as its guard
// (runner.StartGuardProgram). Take takes it out of the environment, so no
// child sees it.
const EnvGuardProgram = "LEADERRUN_GUARD_PROGRAM"

// EnvGuardProtocol names the guard protocol of the leaderrun whose image
// EnvGuardProgram passes as a descriptor (imageFDPrefix).
const EnvGuardProtocol = "LEADERRUN_GUARD_PROTOCOL"

// selfImage is the running program's own image.
const selfImage = "/proc/self/exe"

// imageFDPrefix begins an EnvGuardProgram that is a descriptor of the
// dispatching leaderrun's image, inherited across its execve.
const imageFDPrefix = "/proc/self/fd/"

// Take reads what a dispatching leaderrun said from EnvGuardProgram (and
// EnvGuardProtocol) and returns vars without them. A value that is not an absolute path to an executable
// file is ignored: the guard then runs from this program (and its
// handshake would refuse a stranger anyway). A descriptor of the
// dispatching leaderrun's image is made close-on-exec and kept only when
// that leaderrun speaks this build's guard protocol: the guard then runs
// from it (Trusted); else from this program's own image.
func Take(vars []string) (rest []string, o Origin) {
	protocol := ""
	for _, kv := range vars {
		if v, ok := strings.CutPrefix(kv, EnvGuardProtocol+"="); ok {
			protocol = v
			continue
		}
		p, ok := strings.CutPrefix(kv, EnvGuardProgram+"=")
		if !ok {
			rest = append(rest, kv)
			continue
		}
		o.Dispatched = true
		if n, ok := strings.CutPrefix(p, imageFDPrefix); ok {
			if fd, err := strconv.Atoi(n); err == nil && fd >= 10 {
				unix.CloseOnExec(fd) // no child inherits it
			}
		}
		if st, err := os.Stat(p); err == nil && filepath.IsAbs(p) && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			o.Guard = p
		}
	}
	if strings.HasPrefix(o.Guard, imageFDPrefix) && protocol != runner.GuardProtocol() {
		o.Guard = "" // a leaderrun of another build: guard from this image
	}
	return rest, o
}

// Trusted reports whether the guard program is an image known to
// speak this build's guard protocol (see Take), whose child
// need not wait for the guard's handshake, as with this program's own.
func Trusted(program string) bool {
	return program == selfImage || strings.HasPrefix(program, imageFDPrefix)
}
