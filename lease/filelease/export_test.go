package filelease

import (
	"os"

	"golang.org/x/sys/unix"
)

func unixFcntlGetfd(f *os.File) (int, error) {
	return unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
}
