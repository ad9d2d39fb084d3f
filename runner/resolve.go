package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sentinel errors returned (wrapped, with the command name) by Resolve and Run
// when the command cannot be started. The CLI maps them to the shell's codes.
var (
	// ErrNotFound means the command does not exist: exit code 127.
	ErrNotFound = errors.New("command not found")
	// ErrNotExecutable means the command exists but cannot be executed (no
	// execute permission, a directory, an unknown binary format): exit code 126.
	ErrNotExecutable = errors.New("command not executable")
)

// Resolve returns the path that Run would execute for the command name, using
// exec.LookPath rules (a name with a slash is used as is, otherwise PATH is
// searched). It starts no process, so callers use it to refuse a bad command
// before taking a lease. Errors wrap ErrNotFound or ErrNotExecutable.
//
// Like a shell, a name found in PATH only as a non-executable file is reported
// as ErrNotExecutable rather than ErrNotFound.
func Resolve(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty command name", ErrNotFound)
	}
	if strings.Contains(name, "/") {
		if err := checkExecutable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	if errors.Is(err, exec.ErrDot) {
		// PATH names the current directory; os/exec refuses that on purpose.
		return "", fmt.Errorf("%w: %s: %w", ErrNotFound, name, err)
	}
	// LookPath skips files without execute permission; find one to say so.
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, statErr := os.Stat(p); statErr == nil && !fi.IsDir() {
			return "", fmt.Errorf("%w: %s", ErrNotExecutable, p)
		}
	}
	return "", fmt.Errorf("%w: %s", ErrNotFound, name)
}

// checkExecutable classifies an explicit path the way execve would.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %s", ErrNotFound, path)
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrNotExecutable, path, err)
	case fi.IsDir():
		return fmt.Errorf("%w: %s: is a directory", ErrNotExecutable, path)
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotExecutable, path, err)
	}
	return nil
}

// classifyStartErr maps a start error (spawn's, or exec.Cmd.Start's) to
// the sentinels; the file may have changed between Resolve and the execve.
func classifyStartErr(name string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT, syscall.ENOTDIR:
			return fmt.Errorf("%w: %s: %w", ErrNotFound, name, err)
		case syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.EISDIR,
			syscall.ETXTBSY, syscall.ELIBBAD:
			return fmt.Errorf("%w: %s: %w", ErrNotExecutable, name, err)
		}
	}
	return fmt.Errorf("start %s: %w", name, err)
}
