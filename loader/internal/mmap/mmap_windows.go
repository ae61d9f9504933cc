package mmap

import (
	"fmt"
	"log/slog"
	"os"
	"unsafe"

	"github.com/ggload/ggload/internal/ranges"
	"golang.org/x/sys/windows"
)

// Mapping is a read-only view of a whole file. Windows cannot unmap part of
// a view, so the fragment list only shrinks when the view is closed (as in
// llama.cpp, where unmap_fragment does nothing on Windows).
type Mapping struct {
	data      []byte // the GGUF's bytes in the view
	view      uintptr
	size      int64
	fragments ranges.List
	path      string
	handle    windows.Handle // the file-mapping object
}

// Map maps f. prefetch asks the system to read the file ahead
// (PrefetchVirtualMemory over everything but the lazy ranges); numa and the
// lazy ranges' random-access advice have no Windows counterpart.
func Map(f *os.File, base, size int64, prefetch bool, lazy [][2]int64, numa bool, log *slog.Logger) (*Mapping, error) {
	if size == 0 {
		return &Mapping{path: f.Name()}, nil
	}
	// a view starts on the allocation granularity (64 KiB on every
	// Windows release)
	const gran = 64 << 10
	skew := base % gran
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY, 0, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("loader: CreateFileMapping %s: %w", f.Name(), err)
	}
	off := base - skew
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, uint32(off>>32), uint32(off), uintptr(skew+size))
	if err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("loader: MapViewOfFile %s (%d bytes at %d): %w", f.Name(), size, base, err)
	}
	raw := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), skew+size)
	m := &Mapping{
		data:      raw[skew:],
		view:      addr,
		size:      size,
		fragments: ranges.List{{0, size}},
		path:      f.Name(),
		handle:    h,
	}
	if prefetch && !numa {
		if err := m.prefetch(ranges.List(lazy).Complement(size)); err != nil {
			log.Warn("PrefetchVirtualMemory failed", "file", f.Name(), "err", err)
		}
	}
	return m, nil
}

var procPrefetchVirtualMemory = windows.NewLazySystemDLL("kernel32.dll").NewProc("PrefetchVirtualMemory")

// prefetch asks for the given ranges to be read in (Windows 8 and later;
// nothing happens on older systems).
func (m *Mapping) prefetch(ranges [][2]int64) error {
	if len(ranges) == 0 || procPrefetchVirtualMemory.Find() != nil {
		return nil
	}
	type rangeEntry struct {
		addr uintptr
		n    uintptr
	}
	entries := make([]rangeEntry, len(ranges))
	for i, r := range ranges {
		entries[i] = rangeEntry{uintptr(m.Addr(r[0])), uintptr(r[1] - r[0])}
	}
	ok, _, err := procPrefetchVirtualMemory.Call(uintptr(windows.CurrentProcess()), uintptr(len(entries)), uintptr(unsafe.Pointer(&entries[0])), 0)
	if ok == 0 {
		return err
	}
	return nil
}

// unmapFragment does nothing: a view is unmapped whole, by Close.
func (m *Mapping) UnmapFragment(first, last int64) error { return nil }

// Close unmaps the view and closes the mapping object.
func (m *Mapping) Close() error {
	if m.handle == 0 {
		return nil
	}
	err := windows.UnmapViewOfFile(m.view)
	if cerr := windows.CloseHandle(m.handle); err == nil {
		err = cerr
	}
	m.handle, m.fragments = 0, nil
	return err
}
