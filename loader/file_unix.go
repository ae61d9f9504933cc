//go:build unix

package loader

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ggload/ggload/gguf"
	"golang.org/x/sys/unix"
)

// openModelFile opens a model file from its source for reading: its own
// descriptor of a local file (opened by path, or a duplicate of the
// caller's), and with direct I/O a second one with O_DIRECT when the system,
// the filesystem and the GGUF's place in the file allow it.
func openModelFile(src gguf.Source, direct bool, log *slog.Logger) (*modelFile, error) {
	name := src.Name
	if !src.Local() {
		return &modelFile{path: name, ra: guardReader(src.Reader, name, log), size: src.Size, align: 1, log: log}, nil
	}
	var f *os.File
	if src.Path != "" {
		var err error
		if f, err = src.OpenFile(); err != nil {
			return nil, err
		}
	} else {
		fd, err := dupFile(src.File)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		f = os.NewFile(uintptr(fd), name)
	}
	mf := &modelFile{path: name, f: f, size: src.Size, base: src.Offset, byPath: src.Path != "", align: 1, log: log}
	if now, err := mf.currentSize(); err == nil && now < mf.size {
		mf.size = now // it shrank since the model was opened: the load says which tensor is gone
	}
	if direct {
		if oDirect == 0 {
			log.Warn("direct I/O is not available on this system; reading through the page cache", "file", name)
			return mf, nil
		}
		path := src.Path
		if path == "" {
			path = fmt.Sprintf("/proc/self/fd/%d", f.Fd())
		}
		fd, err := unix.Open(path, unix.O_RDONLY|oDirect|unix.O_CLOEXEC, 0)
		if err != nil {
			log.Warn(fmt.Sprintf("failed to open %s with O_DIRECT (%v); falling back to buffered I/O", name, err))
			return mf, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Blksize <= 0 || st.Blksize&(st.Blksize-1) != 0 {
			unix.Close(fd)
			log.Warn("cannot find the direct I/O alignment; falling back to buffered I/O", "file", name)
			return mf, nil
		}
		align, mem := directAlign(fd, "", int64(st.Blksize))
		if mf.base%align != 0 {
			unix.Close(fd)
			log.Warn(fmt.Sprintf("the GGUF starts at byte %d of %s, not aligned to its %d-byte direct I/O blocks; reading through the page cache", mf.base, name, align))
			return mf, nil
		}
		mf.direct = os.NewFile(uintptr(fd), name)
		mf.align, mf.memAlign = align, mem
	}
	return mf, nil
}

// dupFile duplicates the descriptor of f (close-on-exec): the model keeps
// its own, and the caller closes theirs when they like.
func dupFile(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, ferr := -1, error(nil)
	if err := rc.Control(func(h uintptr) { fd, ferr = unix.FcntlInt(h, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, ferr
}

// readDirect is one aligned O_DIRECT read; it returns fewer bytes only at
// the end of the file.
func (f *modelFile) readDirect(dst []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.direct
	if d == nil {
		n, err := f.readAtBase(dst, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return n, err
	}
	total := 0
	for total < len(dst) {
		n, err := unix.Pread(int(d.Fd()), dst[total:], f.base+off+int64(total))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			break
		}
		total += n
	}
	return total, nil
}

// directRefused tells a read the filesystem refused for direct I/O (its
// alignment rules) from a real read error.
func directRefused(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EFAULT)
}
