//go:build !linux

package loader

import (
	"errors"
	"os"
)

const oDirect = 0 // no O_DIRECT: direct-io falls back to buffered reads

// openRandom is not done here: readWindow reads through the load's
// descriptor.
func openRandom(f *os.File) (*os.File, error) { return nil, errors.ErrUnsupported }

// directAlign is what direct reads need: the block size (no O_DIRECT
// here). The file is path, or the open descriptor fd when path is empty.
func directAlign(fd int, path string, blk int64) (align, mem int64) { return blk, blk }
