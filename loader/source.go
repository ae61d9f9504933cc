package loader

import (
	"errors"
	"fmt"
	"strings"
)

// source is where a tensor's bytes come from while it is loaded: the file
// itself (buffered or direct reads) or its mapping, copied out in Go. Every
// byte handed to native code (tensor_set, set_tensor_async, row
// validation) has first been put by one of these into memory the process
// owns, so that no native call ever reads the mapped file: a file that
// shrinks under the load is an error, not a SIGBUS in native code.
type source interface {
	// alignment of reads (direct I/O), 1 otherwise.
	alignment() int64
	// readAt fills dst with the bytes at off.
	readAt(dst []byte, off int64) error
	// readChunk fills dst with the aligned chunk at pos; bytes past the end
	// of the file read as zeros.
	readChunk(dst []byte, pos int64) error
	// file names the file.
	file() string
}

func (f *modelFile) file() string { return f.path }

// mapSource copies from the mapping of a file.
type mapSource struct {
	mp *mapping
	f  *modelFile
}

func (s mapSource) alignment() int64 { return 1 }

func (s mapSource) file() string { return s.f.path }

func (s mapSource) readChunk(dst []byte, pos int64) error { return s.readAt(dst, pos) }

func (s mapSource) readAt(dst []byte, off int64) error {
	end := off + int64(len(dst))
	if off < 0 || end > s.mp.Size() || end < off {
		return fmt.Errorf("[%d, %d) lies outside the %d mapped bytes of %s", off, end, s.mp.Size(), s.f.path)
	}
	at, err := copyMapped(dst, s.mp.Addr(off))
	if err == nil {
		return nil
	}
	now := "its size is unknown now"
	if n, serr := s.f.currentSize(); serr == nil {
		now = fmt.Sprintf("now %d bytes, %d when opened", n, s.f.size)
	}
	return fmt.Errorf("%s no longer holds byte %d (reading it through the mapping faulted): the file shrank during the load (%s)", s.f.path, off+at, now)
}

// namingFile makes sure a read error names the file (a cancellation is no
// read error).
func namingFile(err error, path string) error {
	if errors.Is(err, ErrCanceled) || errors.Is(err, errStopped) || strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}
