// Package osfile opens model files for reading, refusing what is not a
// regular file (a FIFO, a socket, a device, a directory) before anything
// blocks on it: reading weights from a pipe or /dev/zero would block or
// read garbage, and a FIFO's open waits for a writer.
package osfile

import (
	"errors"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the error of Open for a path that names
// something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// kindError names what the path is instead of a regular file.
type kindError struct{ kind string }

func (e *kindError) Error() string { return ErrNotRegular.Error() + " (" + e.kind + ")" }
func (e *kindError) Unwrap() error { return ErrNotRegular }

// kind names a non-regular file mode.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.Type().String()
}

// notRegular is Open's error for path, which is of mode m.
func notRegular(path string, m fs.FileMode) error {
	return &fs.PathError{Op: "open", Path: path, Err: &kindError{kind(m)}}
}

// Open opens path read-only when it is a regular file, with its size and
// modification time as of the open.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := open(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(path, fi.Mode())
	}
	return f, fi, nil
}

// Check stats an open file: a regular file open for reading.
func Check(f *os.File) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(f.Name(), fi.Mode())
	}
	if err := readable(f); err != nil {
		return nil, err
	}
	return fi, nil
}
