//go:build unix

package loader

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ggload/ggload/internal/osfile"
	"golang.org/x/sys/unix"
)

func openModelFile(path string, direct bool, log *slog.Logger) (*modelFile, error) {
	f, st, err := osfile.Open(path)
	if err != nil {
		return nil, err
	}
	mf := &modelFile{path: path, f: f, size: st.Size(), align: 1, log: log}
	if direct {
		if oDirect == 0 {
			log.Warn("direct I/O is not available on this system; reading through the page cache", "file", path)
			return mf, nil
		}
		fd, err := unix.Open(path, unix.O_RDONLY|oDirect|unix.O_CLOEXEC, 0)
		if err != nil {
			log.Warn(fmt.Sprintf("failed to open %s with O_DIRECT (%v); falling back to buffered I/O", path, err))
			return mf, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Blksize <= 0 || st.Blksize&(st.Blksize-1) != 0 {
			unix.Close(fd)
			log.Warn("cannot find the direct I/O alignment; falling back to buffered I/O", "file", path)
			return mf, nil
		}
		mf.direct = os.NewFile(uintptr(fd), path)
		mf.align = int64(st.Blksize)
	}
	return mf, nil
}

// readDirect is one aligned O_DIRECT read; it returns fewer bytes only at
// the end of the file.
func (f *modelFile) readDirect(dst []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.direct
	if d == nil {
		n, err := f.f.ReadAt(dst, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return n, err
	}
	total := 0
	for total < len(dst) {
		n, err := unix.Pread(int(d.Fd()), dst[total:], off+int64(total))
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
