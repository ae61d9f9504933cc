//go:build unix

package loader

import (
	"io/fs"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func blockSize(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blksize > 0 {
		return uint64(st.Blksize)
	}
	return 1
}

// addressSpace is the process's address-space limit and its address space
// in use (VmSize), when there is a limit and the use is known.
func addressSpace() (limit, used uint64, ok bool) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return 0, 0, false
	}
	v, found := statusField("VmSize:")
	if !found {
		return 0, 0, false
	}
	kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return lim.Cur, kb << 10, true
}
