package loader

import (
	"errors"
	"io"
	"log/slog"

	"github.com/ggload/ggload/internal/osfile"
)

// openModelFile opens a model file for buffered reads. Direct I/O reads
// through the file cache on Windows too, as llama.cpp of the pin does there
// (its Windows file reads with plain ReadFile whatever the mode).
func openModelFile(path string, direct bool, log *slog.Logger) (*modelFile, error) {
	f, st, err := osfile.Open(path)
	if err != nil {
		return nil, err
	}
	return &modelFile{path: path, f: f, size: st.Size(), align: 1, log: log}, nil
}

// readDirect reads what it can at off; it returns fewer bytes only at the
// end of the file.
func (f *modelFile) readDirect(dst []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(dst, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

func directRefused(err error) bool { return false }
