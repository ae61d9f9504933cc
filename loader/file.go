package loader

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"unsafe"
)

// modelFile is one file of the model, opened for reading: buffered, or
// bypassing the page cache (O_DIRECT on Linux) when direct I/O was asked for
// and the system and filesystem allow it.
type modelFile struct {
	path string
	f    *os.File // buffered reads (always open: mapping and fallback)
	size int64

	mu     sync.RWMutex // read-held by each direct read, so that fallBack's close waits for them
	direct *os.File     // direct reads, nil when not in use
	align  int64        // direct I/O alignment (1 without direct I/O)
	log    *slog.Logger
}

// alignment is the direct I/O alignment, 1 without direct I/O.
func (f *modelFile) alignment() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.align
}

// currentSize stats the file again (it may have shrunk since it was opened).
func (f *modelFile) currentSize() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// fallBack stops using direct I/O after a refused read.
func (f *modelFile) fallBack(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.direct != nil {
		f.log.Warn(fmt.Sprintf("direct read of %s failed (%v); falling back to buffered I/O", f.path, err))
		f.direct.Close()
		f.direct, f.align = nil, 1
	}
}

// readFull reads len(dst) bytes at off; running into the end of the file is
// an error that names it (the file shrank).
func readFull(r io.ReaderAt, dst []byte, off int64, path string) error {
	n, err := r.ReadAt(dst, off)
	if n == len(dst) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%s ends at byte %d, inside the range [%d, %d) (did the file shrink?)", path, off+int64(n), off, off+int64(len(dst)))
	}
	return err
}

// readAt reads exactly len(dst) bytes at off into any memory: directly when
// buffered, through an aligned bounce buffer with direct I/O.
func (f *modelFile) readAt(dst []byte, off int64) error {
	f.mu.RLock()
	direct, align := f.direct, f.align
	f.mu.RUnlock()
	if direct == nil {
		return readFull(f.f, dst, off, f.path)
	}
	start := off &^ (align - 1)
	end := (off + int64(len(dst)) + align - 1) &^ (align - 1)
	const chunk = 16 << 20
	bounce := alignedBuffer(int64(min(end-start, chunk)), align)
	for pos := start; pos < end; {
		n := min(end-pos, int64(len(bounce)))
		got, err := f.readDirect(bounce[:n], pos)
		if err != nil {
			if directRefused(err) {
				f.fallBack(err)
				return f.readAt(dst, off)
			}
			return err
		}
		// copy the part of [pos, pos+got) that lies in [off, off+len)
		lo, hi := max(pos, off), min(pos+int64(got), off+int64(len(dst)))
		if hi > lo {
			copy(dst[lo-off:hi-off], bounce[lo-pos:hi-pos])
		}
		if int64(got) < n {
			if pos+int64(got) < off+int64(len(dst)) {
				return fmt.Errorf("%s ends at byte %d, inside the range [%d, %d) (did the file shrink?)", f.path, pos+int64(got), off, off+int64(len(dst)))
			}
			return nil
		}
		pos += n
	}
	return nil
}

// alignedBuffer returns n bytes whose start is aligned to align.
func alignedBuffer(n, align int64) []byte {
	raw := make([]byte, n+align)
	skip := (align - int64(uintptr(unsafe.Pointer(&raw[0])))&(align-1)) & (align - 1)
	return raw[skip : skip+n]
}

func (f *modelFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.direct != nil {
		f.direct.Close()
		f.direct = nil
	}
	return f.f.Close()
}
