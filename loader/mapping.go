package loader

import (
	"slices"
	"unsafe"
)

// complement merges ranges and returns what they leave uncovered in
// [0, limit).
func complement(ranges [][2]int64, limit int64) [][2]int64 {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	var out [][2]int64
	pos := int64(0)
	for _, r := range rs {
		beg, end := min(r[0], limit), min(r[1], limit)
		if beg > pos {
			out = append(out, [2]int64{pos, beg})
		}
		pos = max(pos, end)
	}
	if pos < limit {
		out = append(out, [2]int64{pos, limit})
	}
	return out
}

// Addr is the address of the byte at offset off of the file.
func (m *mapping) Addr(off int64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.data)), off)
}

// Size is the mapped file size.
func (m *mapping) Size() int64 { return m.size }

// Fragments are the ranges still mapped.
func (m *mapping) Fragments() [][2]int64 { return slices.Clone(m.fragments) }
