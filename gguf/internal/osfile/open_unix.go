//go:build unix

package osfile

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// open opens path without blocking (a FIFO's open would wait for a writer,
// a device's may wait for the device), refuses anything but a regular file
// from its fstat, and only then makes the descriptor blocking again.
func open(path string) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENXIO) {
			// a socket (or a device with nothing behind it): say which
			if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
				return nil, notRegular(path, fi.Mode())
			}
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, notRegular(path, modeOf(uint32(st.Mode)))
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// modeOf is the fs.FileMode type bits of a stat mode.
func modeOf(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// readable refuses a descriptor open for writing only.
func readable(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fl int
	var ferr error
	if err := rc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		return err
	}
	if ferr != nil {
		return &fs.PathError{Op: "fcntl", Path: f.Name(), Err: ferr}
	}
	if fl&unix.O_ACCMODE == unix.O_WRONLY {
		return &fs.PathError{Op: "read", Path: f.Name(), Err: errors.New("the descriptor is open for writing only")}
	}
	return nil
}
