package loader

import (
	"slices"
	"unsafe"
)

// Addr is the address of the byte at offset off of the file.
func (m *mapping) Addr(off int64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.data)), off)
}

// Size is the mapped file size.
func (m *mapping) Size() int64 { return m.size }

// Fragments are the ranges still mapped.
func (m *mapping) Fragments() [][2]int64 { return slices.Clone(m.fragments) }
