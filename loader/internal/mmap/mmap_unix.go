//go:build unix

package mmap

import (
	"fmt"
	"log/slog"
	"os"
	"unsafe"

	"github.com/ggload/ggload/internal/ranges"
	"golang.org/x/sys/unix"
)

// Mapping is a read-only shared mapping of a whole file, and the list of its
// fragments still mapped (unmapFragment removes page-aligned pieces).
type Mapping struct {
	data      []byte // the GGUF's bytes in the mapping
	size      int64
	skew      int64 // bytes mapped before data: from the page its start lies in
	fragments ranges.List
	path      string
}

// abs is the offset of the GGUF's byte off from the mapping's start, which
// is page-aligned.
func (m *Mapping) abs(off int64) int64 { return off + m.skew }

// pageSpan is the mapping's length in whole pages.
func (m *Mapping) pageSpan() int64 {
	page := int64(unix.Getpagesize())
	return (m.skew + m.size + page - 1) &^ (page - 1)
}

// at is the address of the mapping's byte abs (from its page-aligned start).
func (m *Mapping) at(abs int64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.data)), abs-m.skew)
}

// Map maps f. prefetch asks the kernel to read the file ahead (all of it
// with MAP_POPULATE when no range is lazy; otherwise MADV_WILLNEED over
// everything but the lazy ranges), lazy ranges get MADV_RANDOM, and on NUMA
// machines the whole mapping does (and nothing is prefetched, so that pages
// land on the node that first touches them).
// The GGUF lies at base in f (a GGUF inside a bigger file): the mapping
// starts at the page base lies in.
func Map(f *os.File, base, size int64, prefetch bool, lazy [][2]int64, numa bool, log *slog.Logger) (*Mapping, error) {
	if size == 0 {
		return &Mapping{path: f.Name()}, nil
	}
	page := int64(unix.Getpagesize())
	skew := base & (page - 1)
	fd := int(f.Fd())
	if numa {
		prefetch = false
	}
	if err := adviseSequential(fd); err != nil {
		log.Warn("posix_fadvise(POSIX_FADV_SEQUENTIAL) failed", "file", f.Name(), "err", err)
	}
	flags := unix.MAP_SHARED
	if PopulatesAll(prefetch, lazy) {
		flags |= mapPopulate
	}
	// MmapPtr, not Mmap: pieces of the mapping are unmapped one by one
	ptr, err := unix.MmapPtr(fd, base-skew, nil, uintptr(skew+size), unix.PROT_READ, flags)
	if err != nil {
		return nil, fmt.Errorf("loader: mmap %s (%d bytes at %d): %w", f.Name(), size, base, err)
	}
	raw := unsafe.Slice((*byte)(ptr), skew+size)
	m := &Mapping{data: raw[skew:], size: size, skew: skew, fragments: ranges.List{{0, size}}, path: f.Name()}
	advise := func(beg, end int64, advice int, name string) {
		beg = m.abs(beg) &^ (page - 1)
		end = min((m.abs(end)+page-1)&^(page-1), skew+size)
		if beg >= end {
			return
		}
		if err := unix.Madvise(raw[beg:end], advice); err != nil {
			log.Warn("madvise failed", "advice", name, "file", f.Name(), "err", err)
		}
	}
	if prefetch {
		for _, r := range ranges.List(lazy).Complement(size) {
			advise(r[0], r[1], unix.MADV_WILLNEED, "MADV_WILLNEED")
		}
	}
	for _, r := range lazy {
		advise(r[0], r[1], unix.MADV_RANDOM, "MADV_RANDOM")
	}
	if numa {
		advise(0, size, unix.MADV_RANDOM, "MADV_RANDOM")
	}
	return m, nil
}

// UnmapFragment unmaps the whole pages inside [first, last) and removes them
// from the fragment list; partial pages at either end stay mapped.
func (m *Mapping) UnmapFragment(first, last int64) error {
	page := int64(unix.Getpagesize())
	a := (m.abs(first) + page - 1) &^ (page - 1)
	b := min(m.abs(last)&^(page-1), m.pageSpan())
	if b <= a {
		return nil
	}
	if err := munmapRange(m.at(a), uintptr(b-a)); err != nil {
		return fmt.Errorf("loader: munmap %s [%#x, %#x): %w", m.path, a-m.skew, b-m.skew, err)
	}
	m.fragments = ranges.List(m.fragments).Cut(a-m.skew, b-m.skew)
	return nil
}

// munmapRange unmaps part of a mapping (unix.Munmap only takes whole ones).
func munmapRange(addr unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(addr), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

// Close unmaps every fragment still mapped.
func (m *Mapping) Close() error {
	var first error
	page := int64(unix.Getpagesize())
	for _, f := range m.fragments {
		beg := m.abs(f[0]) &^ (page - 1)
		end := min((m.abs(f[1])+page-1)&^(page-1), m.pageSpan())
		if err := munmapRange(m.at(beg), uintptr(end-beg)); err != nil && first == nil {
			first = err
		}
	}
	m.fragments = nil
	return first
}
