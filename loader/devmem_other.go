//go:build !linux

package loader

// anonRanges are address ranges of anonymous memory (Linux only).
type anonRanges [][2]uintptr

func anonMemory() anonRanges { return nil }

func adviseNewMemory(before anonRanges) anonRanges { return nil }

func (rs anonRanges) bytes() uint64 { return 0 }

type prefaulter struct{}

func prefault(rs anonRanges) *prefaulter { return &prefaulter{} }

func (pf *prefaulter) wait() {}
