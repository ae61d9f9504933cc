package ggml_test

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// mapReadOnly maps the first n bytes of f, read-only.
func mapReadOnly(f *os.File, n int) ([]byte, func(), error) {
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY, 0, 0, nil)
	if err != nil {
		return nil, nil, err
	}
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(n))
	if err != nil {
		windows.CloseHandle(h)
		return nil, nil, err
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), n), func() {
		windows.UnmapViewOfFile(addr)
		windows.CloseHandle(h)
	}, nil
}
