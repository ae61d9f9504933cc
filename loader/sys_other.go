//go:build !linux

package loader

import "unsafe"

const (
	mapPopulate = 0
	oDirect     = 0 // no O_DIRECT: direct-io falls back to buffered reads
)

func adviseSequential(fd int) error { return nil }

func adviseHugePages(p unsafe.Pointer, n uint64) {}
