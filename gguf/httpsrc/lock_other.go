//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || solaris || windows)

package httpsrc

import (
	"errors"
	"os"
)

// errNoLock: a download holds a lock on its partial file, and this system
// offers none that the package uses.
var errNoLock = errors.New("downloads need file locks (flock or LockFileEx), which this system lacks")

func openPartial(path string) (*os.File, error) { return nil, errNoLock }

// openSide opens a side file for reading, refusing a symbolic link (not
// atomically: there is no O_NOFOLLOW here).
func openSide(path string) (*os.File, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New(path + ": no regular file")
	}
	return os.Open(path)
}

func tryLock(f *os.File) (bool, error) { return false, errNoLock }

func unlock(f *os.File) {}
