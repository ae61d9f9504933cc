package loader

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ggload/ggload/gguf"
	"golang.org/x/sys/windows"
)

// openModelFile opens a model file from its source for buffered reads: its
// own handle of a local file (opened by path, or a duplicate of the
// caller's). Direct I/O reads through the file cache on Windows too, as
// llama.cpp of the pin does there (its Windows file reads with plain
// ReadFile whatever the mode).
func openModelFile(src gguf.Source, direct bool, log *slog.Logger) (*modelFile, error) {
	if !src.Local() {
		return &modelFile{path: src.Name, ra: guardReader(src.Reader, src.Name, log), size: src.Size, align: 1, log: log}, nil
	}
	var f *os.File
	if src.Path != "" {
		var err error
		if f, err = src.OpenFile(); err != nil {
			return nil, err
		}
	} else {
		self := windows.CurrentProcess()
		var h windows.Handle
		if err := windows.DuplicateHandle(self, windows.Handle(src.File.Fd()), self, &h, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name, err)
		}
		f = os.NewFile(uintptr(h), src.Name)
	}
	mf := &modelFile{path: src.Name, f: f, size: src.Size, base: src.Offset, byPath: src.Path != "", align: 1, log: log}
	if now, err := mf.currentSize(); err == nil && now < mf.size {
		mf.size = now // it shrank since the model was opened: the load says which tensor is gone
	}
	return mf, nil
}

// readDirect reads what it can at off; it returns fewer bytes only at the
// end of the file.
func (f *modelFile) readDirect(dst []byte, off int64) (int, error) {
	n, err := f.readAtBase(dst, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

func directRefused(err error) bool { return false }
