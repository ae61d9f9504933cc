//go:build windows

package httpsrc

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// openPartial opens a download's partial file for reading and writing,
// made if it is not there, without following a reparse point (a symbolic
// link, a junction).
func openPartial(path string) (*os.File, error) {
	return openNoFollow(path, windows.GENERIC_READ|windows.GENERIC_WRITE, windows.OPEN_ALWAYS)
}

// openSide opens a side file for reading, without following a reparse
// point.
func openSide(path string) (*os.File, error) {
	return openNoFollow(path, windows.GENERIC_READ, windows.OPEN_EXISTING)
}

// openNoFollow opens the reparse point itself where there is one, and
// refuses it, as it refuses anything but a file. Others may read, write,
// rename and delete the file while it is open (FILE_SHARE_DELETE): a
// download renames its partial file while a waiting one holds it open.
func openNoFollow(path string, access, disposition uint32) (*os.File, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	share := uint32(windows.FILE_SHARE_READ | windows.FILE_SHARE_WRITE | windows.FILE_SHARE_DELETE)
	h, err := windows.CreateFile(p, access, share, nil, disposition, windows.FILE_ATTRIBUTE_NORMAL|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	switch {
	case info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		windows.CloseHandle(h)
		return nil, fmt.Errorf("%w: %s is a reparse point (a symbolic link or junction)", ErrDestination, path)
	case info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0:
		windows.CloseHandle(h)
		return nil, fmt.Errorf("%w: %s is a directory", ErrDestination, path)
	}
	return os.NewFile(uintptr(h), path), nil
}

// lockAt is the byte the lock covers: far past any file's end, so that
// the lock (which Windows enforces on the bytes it covers) never stops
// a read or write of the file's bytes.
const lockAt = 1<<63 - 2

// tryLock takes f's exclusive lock, or reports that another holds it.
func tryLock(f *os.File) (bool, error) {
	ol := windows.Overlapped{Offset: uint32(lockAt & 0xffffffff), OffsetHigh: uint32(lockAt >> 32)}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION), errors.Is(err, windows.ERROR_IO_PENDING):
		return false, nil
	}
	return false, err
}

// unlock lets f's lock go (closing f does too, in time).
func unlock(f *os.File) {
	ol := windows.Overlapped{Offset: uint32(lockAt & 0xffffffff), OffsetHigh: uint32(lockAt >> 32)}
	windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
