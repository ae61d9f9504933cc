//go:build !linux

package loader

import "unsafe"

// anonRanges are address ranges of anonymous memory (Linux only).
type anonRanges [][2]uintptr

func anonMemory() anonRanges { return nil }

func adviseNewMemory(before anonRanges) anonRanges { return nil }

func (rs anonRanges) bytes() uint64 { return 0 }

func (rs anonRanges) release() {}

type prefaulter struct{}

func prefault(rs anonRanges) *prefaulter { return &prefaulter{} }

func (pf *prefaulter) wait() {}

func (pf *prefaulter) finish() {}

func populateLater() bool { return false }

func populateMapped(p unsafe.Pointer, n uint64, fd int, off int64) *prefaulter {
	return &prefaulter{}
}
