//go:build unix

package loader

import (
	"io/fs"
	"syscall"
)

func blockSize(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blksize > 0 {
		return uint64(st.Blksize)
	}
	return 1
}
