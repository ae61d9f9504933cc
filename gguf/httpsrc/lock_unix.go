//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || solaris

package httpsrc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openPartial opens a download's partial file for reading and writing,
// made if it is not there, without following a symbolic link.
func openPartial(path string) (*os.File, error) {
	return openNoFollow(path, os.O_RDWR|os.O_CREATE)
}

// openSide opens a side file for reading, without following a symbolic
// link.
func openSide(path string) (*os.File, error) {
	return openNoFollow(path, os.O_RDONLY)
}

// openNoFollow opens path with O_NOFOLLOW, and O_NONBLOCK so that a FIFO
// there does not block the open; anything but a regular file is refused.
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		// (FreeBSD and NetBSD say EMLINK where the others say ELOOP)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrDestination, path)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is no regular file (%s)", ErrDestination, path, st.Mode().Type())
	}
	return f, nil
}

// tryLock takes f's exclusive lock (flock: held by the open file, so two
// opens in one process exclude each other too), or reports that another
// holds it.
func tryLock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		}
		return false, err
	}
}

// unlock lets f's lock go (closing f does too).
func unlock(f *os.File) {
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
}
