package sysmem

import "unsafe"

// Ranges are address ranges [start, end) of this process's memory, in
// address order.
type Ranges [][2]uintptr

// WholePages are the whole 4 KiB pages of [p, p+n): none when the range
// holds no whole page.
func WholePages(p unsafe.Pointer, n uint64) Ranges {
	b := uintptr(p)
	if start, end := (b+4095)&^4095, (b+uintptr(n))&^4095; end > start {
		return Ranges{{start, end}}
	}
	return nil
}

// Bytes is the memory the ranges span.
func (rs Ranges) Bytes() uint64 {
	var n uint64
	for _, r := range rs {
		n += uint64(r[1] - r[0])
	}
	return n
}
