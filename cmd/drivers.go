package cmd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/runner"
)

// LinkedStore is a store linked into this program: the URL schemes it serves and
// its opener. The leaderrun program links only the file store; each other
// store lives in a program of its own (drivers), so that a run pays the
// start-up cost of exactly the store it uses (the Azure, etcd and
// PostgreSQL clients alone take milliseconds to initialise; see
// docs/performance.md).
type LinkedStore struct {
	// Schemes are the URL schemes, lower case.
	Schemes []string
	// Open opens the store named by a --store URL. It must never put a
	// secret from raw into an error. o.CallTimeout bounds one store call
	// (docs/design.md, safety rule 4); o.Getenv is Main's environment.
	Open func(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error)
}

// Link makes the LinkedStore of a store package from its schemes and its
// Open.
func Link[S lease.Store](schemes []string, open func(ctx context.Context, raw string, o lease.OpenOptions) (S, error)) LinkedStore {
	return LinkedStore{Schemes: schemes, Open: func(ctx context.Context, raw string, o lease.OpenOptions) (lease.Store, error) {
		s, err := open(ctx, raw, o)
		if err != nil {
			return nil, err // not s: a nil *Store in a lease.Store is not nil
		}
		return s, nil
	}}
}

// drivers names the program that serves each scheme leaderrun knows but
// may not link. `go build -o DIR/ . ./cmd/...` in a clone builds them all
// next to leaderrun, as the packages install them; cmd/leaderrun-*/main.go
// are they. A new store program is its schemes here and in knownSchemes,
// and its URL form in --store's usage (commonFlags).
var drivers = map[string]string{
	"redis": "leaderrun-redis", "rediss": "leaderrun-redis", "unix": "leaderrun-redis",
	"redis+sentinel": "leaderrun-redis", "rediss+sentinel": "leaderrun-redis",
	"redis+cluster": "leaderrun-redis", "rediss+cluster": "leaderrun-redis",
	"azblob": "leaderrun-azblob", "azblob+https": "leaderrun-azblob", "azblob+http": "leaderrun-azblob",
	"etcd": "leaderrun-etcd", "etcds": "leaderrun-etcd",
	"postgres": "leaderrun-postgres", "postgresql": "leaderrun-postgres",
	"kubernetes": "leaderrun-kubernetes",
}

// knownSchemes lists every scheme for messages, linked or not.
const knownSchemes = "file, redis, rediss, unix, redis+sentinel, redis+cluster, azblob, azblob+https, azblob+http, etcd, etcds, postgres, postgresql or kubernetes"

// register links stores into this program.
func register(stores []LinkedStore) {
	for _, s := range stores {
		for _, scheme := range s.Schemes {
			storeOpeners[scheme] = s.Open
		}
	}
}

// dispatch hands the whole run to the program that serves raw's scheme when
// this one does not link it: it replaces this process (same PID, same
// arguments, environment and descriptors: nothing has started yet) and
// returns only on failure. It returns nil when this program serves raw.
// The arguments and environment are Main's, e.argv and e.environ().
func (e env) dispatch(raw string) error {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil // openStore explains
	}
	scheme = strings.ToLower(scheme)
	if _, linked := storeOpeners[scheme]; linked {
		return nil
	}
	prog, ok := drivers[scheme]
	if !ok {
		return nil // openStore says the scheme is unknown
	}
	path, err := findDriver(prog)
	if err != nil {
		return err
	}
	// A program that was itself dispatched to, and does not link the
	// scheme either, is not the store program it was named as (a link or
	// copy of leaderrun under that name): dispatching again would exec
	// the same program forever.
	if e.dispatched {
		return lease.NewError(fmt.Sprintf("%s:// URLs are served by %s, but the %s found there does not link this store (a link to or copy of leaderrun? a mismatched installation)", scheme, prog, path), lease.ErrConfig)
	}
	environ := e.environ()
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
			environ = append(environ, envGuardProgram+"="+imageFDPrefix+strconv.Itoa(fd),
				envGuardProtocol+"="+runner.GuardProtocol()) // Main takes them out again
		}
		f.Close()
	}
	if image < 0 {
		if self, err := os.Executable(); err == nil {
			environ = append(environ, envGuardProgram+"="+self) // Main takes it out again
		}
	}
	err = syscall.Exec(path, e.argv, environ)
	if image >= 0 {
		unix.Close(image)
	}
	return lease.NewError(fmt.Sprintf("%s:// URLs are served by %s, which could not be started: %v", scheme, path, err), lease.ErrConfig)
}

// findDriver looks for prog next to the running program, then on PATH (as
// git finds git-*), never this program itself.
func findDriver(prog string) (string, error) {
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

// envGuardProgram tells a store program which leaderrun dispatched to it:
// that smaller program of the same installation runs as its guard
// (runner.StartGuardProgram). Main takes it out of the environment, so no
// child sees it.
const envGuardProgram = "LEADERRUN_GUARD_PROGRAM"

// envGuardProtocol names the guard protocol of the leaderrun whose image
// envGuardProgram passes as a descriptor (imageFDPrefix).
const envGuardProtocol = "LEADERRUN_GUARD_PROTOCOL"

// selfImage is the running program's own image.
const selfImage = "/proc/self/exe"

// imageFDPrefix begins an envGuardProgram that is a descriptor of the
// dispatching leaderrun's image, inherited across its execve.
const imageFDPrefix = "/proc/self/fd/"

// takeGuardProgram sets e's guardProgram and dispatched from
// envGuardProgram (and envGuardProtocol) and removes the variables from
// e's environment. A value that is not an absolute path to an executable
// file is ignored: the guard then runs from this program (and its
// handshake would refuse a stranger anyway). A descriptor of the
// dispatching leaderrun's image is made close-on-exec and kept only when
// that leaderrun speaks this build's guard protocol: the guard then runs
// from it (trustedGuard); else from this program's own image.
func takeGuardProgram(e env) env {
	var rest []string
	protocol := ""
	for _, kv := range e.vars {
		if v, ok := strings.CutPrefix(kv, envGuardProtocol+"="); ok {
			protocol = v
			continue
		}
		p, ok := strings.CutPrefix(kv, envGuardProgram+"=")
		if !ok {
			rest = append(rest, kv)
			continue
		}
		e.dispatched = true
		if n, ok := strings.CutPrefix(p, imageFDPrefix); ok {
			if fd, err := strconv.Atoi(n); err == nil && fd >= 10 {
				unix.CloseOnExec(fd) // no child inherits it
			}
		}
		if st, err := os.Stat(p); err == nil && filepath.IsAbs(p) && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			e.guardProgram = p
		}
	}
	if strings.HasPrefix(e.guardProgram, imageFDPrefix) && protocol != runner.GuardProtocol() {
		e.guardProgram = "" // a leaderrun of another build: guard from this image
	}
	e.vars = rest
	return e
}

// trustedGuard reports whether the guard program is an image known to
// speak this build's guard protocol (see takeGuardProgram), whose child
// need not wait for the guard's handshake, as with this program's own.
func trustedGuard(program string) bool {
	return program == selfImage || strings.HasPrefix(program, imageFDPrefix)
}
