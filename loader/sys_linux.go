//go:build linux

package loader

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	mapPopulate = unix.MAP_POPULATE
	oDirect     = unix.O_DIRECT
)

// adviseSequential is posix_fadvise(POSIX_FADV_SEQUENTIAL).
func adviseSequential(fd int) error { return unix.Fadvise(fd, 0, 0, unix.FADV_SEQUENTIAL) }

// adviseHugePages asks for transparent huge pages over the page-aligned
// part of [p, p+n): a fresh buffer filled by the load then takes one fault
// per 2 MiB instead of one per 4 KiB. Best effort; errors are ignored.
func adviseHugePages(p unsafe.Pointer, n uint64) {
	const page = 4096
	start := (uintptr(p) + page - 1) &^ (page - 1)
	end := (uintptr(p) + uintptr(n)) &^ (page - 1)
	if end <= start {
		return
	}
	unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_HUGEPAGE)
}
