package loader

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader/internal/mmap"
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

// mapSource copies from the mapping of a file: the row checks of tensors
// left in it.
type mapSource struct {
	mp *mmap.Mapping
	f  *modelFile
}

func (s mapSource) file() string { return s.f.path }

func (s mapSource) readAt(dst []byte, off int64) error {
	end := off + int64(len(dst))
	if off < 0 || end > s.mp.Size() || end < off {
		return fmt.Errorf("[%d, %d) lies outside the %d mapped bytes of %s", off, end, s.mp.Size(), s.f.path)
	}
	if _, err := mmap.Copy(dst, s.mp.Addr(off)); err != nil {
		return s.f.truncated(off, true)
	}
	return nil
}

// namingFile makes sure a read error of tensor data w names the file (a
// cancellation is no read error), and that a short read says which bytes
// the tensor's data are.
func namingFile(err error, path string, w *gguf.Weight) error {
	var te *truncatedError
	if errors.As(err, &te) && te.to <= te.from && w != nil {
		te.from, te.to = w.Offset, w.Offset+w.Size
	}
	if errors.Is(err, ErrCanceled) || errors.Is(err, errStopped) || strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}
