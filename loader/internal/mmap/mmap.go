// Port of llama.cpp src/llama-mmap.cpp (v0.5.0): llama_mmap.

// Package mmap maps a model's files as llama.cpp's llama_mmap does: one
// read-only shared mapping of a whole file, prefetched or advised as the
// load mode and the lazy ranges ask, and its fragment list, from which
// unmap_fragment takes page-aligned pieces. Copy reads a mapping in Go,
// with a fault (a file that shrank) an error, not a SIGBUS in native
// code.
package mmap

import (
	"slices"
	"unsafe"

	"github.com/ggload/ggload/loader/internal/sysmem"
)

// PopulatesAll reports whether Map maps in every page of a file as it
// maps it (MAP_POPULATE): when it prefetches, no range of the file is
// lazy, and the kernel cannot populate part of a mapping later
// (sysmem.PopulateLater).
func PopulatesAll(prefetch bool, lazy [][2]int64) bool {
	return prefetch && len(lazy) == 0 && !sysmem.PopulateLater()
}

// Addr is the address of the byte at offset off of the file.
func (m *Mapping) Addr(off int64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.data)), off)
}

// Size is the mapped file size.
func (m *Mapping) Size() int64 { return m.size }

// Fragments are the ranges still mapped.
func (m *Mapping) Fragments() [][2]int64 { return slices.Clone(m.fragments) }

// Path is the mapped file's name.
func (m *Mapping) Path() string { return m.path }
