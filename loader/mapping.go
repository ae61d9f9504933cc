package loader

import (
	"slices"
	"unsafe"

	"github.com/ggload/ggload/loader/internal/sysmem"
	"github.com/ggload/ggload/place"
)

// lazyRanges are the ranges of p's lazy tensors in each of its files, and
// whether there is any.
func lazyRanges(p *place.Plan) (lazy [][][2]int64, some bool) {
	lazy = make([][][2]int64, len(p.Model.Files))
	for _, t := range p.Tensors {
		if t.Lazy {
			lazy[t.Weight.File] = append(lazy[t.Weight.File], [2]int64{t.Weight.Offset, t.Weight.Offset + t.Bytes})
			some = true
		}
	}
	return lazy, some
}

// populatesAll reports whether mapFile maps in every page of a file as it
// maps it (MAP_POPULATE): when it prefetches, no range of the file is
// lazy, and the kernel cannot populate part of a mapping later
// (sysmem.PopulateLater).
func populatesAll(prefetch bool, lazy [][2]int64) bool {
	return prefetch && len(lazy) == 0 && !sysmem.PopulateLater()
}

// Addr is the address of the byte at offset off of the file.
func (m *mapping) Addr(off int64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.data)), off)
}

// Size is the mapped file size.
func (m *mapping) Size() int64 { return m.size }

// Fragments are the ranges still mapped.
func (m *mapping) Fragments() [][2]int64 { return slices.Clone(m.fragments) }
